/**
 * The operator's side of governance (the plugin option `governance`): model prices for every project, and the
 * bounds on how fresh each instance's view of the rules and the shared budget counters is. Projects set their
 * own rules in Medplum (project-governance-settings.ts).
 */
import { z } from 'zod';

const priceSchema = z
  .object({
    /** US dollars per 1M input (prompt) tokens. */
    input: z.number().min(0).max(100_000),
    /** US dollars per 1M output (completion) tokens. */
    output: z.number().min(0).max(100_000),
  })
  .strict();

/** Schema of the `governance` option. */
export const governanceOptionsSchema = z
  .object({
    /** Prices by `provider/model`, for cost budgets and the usage report; a project's `AI_MODEL_PRICES` wins for its models. */
    prices: z.record(z.string().regex(/^[^/\s]+\/\S+$/, 'a provider/model id'), priceSchema).default({}),
    /** Longest an AccessPolicy's model grants are kept before they are read again (an edit applies within it). */
    accessPolicyCacheMs: z.number().int().min(0).max(300_000).default(5000),
    /** A budget counter view older than this is read again from Redis in the background. */
    budgetRefreshMs: z.number().int().min(0).max(60_000).default(1000),
    /** A budget counter view older than this (a user idle for a while) is read again before the check. */
    budgetMaxAgeMs: z.number().int().min(0).max(300_000).default(5000),
    /**
     * When a client leaves a turn before its end, the provider call runs on, unseen, for at most this long, so that
     * the provider's own usage is what the turn is charged (an estimate otherwise); 0 cancels it at once.
     */
    usageWaitMs: z.number().int().min(0).max(30_000).default(1000),
  })
  .strict();

/** The `governance` option, defaults filled in. */
export type GovernanceOptions = z.output<typeof governanceOptionsSchema>;
