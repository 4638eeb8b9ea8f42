/**
 * The governance layer of the chat routes, built once per plugin: who may use which model (model-access.ts), token
 * and cost budgets (budgets.ts, budget-counters.ts) and the usage report (usage-report.ts). The chat pipeline calls
 * it in two named steps before anything of a turn is stored or sent (`checkModelAccess` first, `checkBudgets` after
 * the patient data egress step of patient-data-egress.ts), reserves the turn's likely cost just before its prompt is
 * stored, and settles the budgets where the reply is recorded (chat-turn.ts).
 */
import type { FhirgateHost, CallerContext } from '../host.ts';
import type { ResolvedModel } from '../llm/model-registry.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import { BudgetCounters } from './budget-counters.ts';
import { storedRepliesSeeder } from './budget-seed.ts';
import { Budgets, type TurnBudget, type TurnReservation } from './budgets.ts';
import type { GovernanceOptions } from './governance-options.ts';
import { ModelAccess } from './model-access.ts';
import { modelPricesOf } from './model-prices.ts';
import { ProjectGovernanceSettings } from './project-governance-settings.ts';

/** The governance services of one plugin. */
export interface Governance {
  readonly settings: ProjectGovernanceSettings;
  readonly modelAccess: ModelAccess;
  readonly budgets: Budgets;
  readonly counters: BudgetCounters;
  /** How long a provider call whose client left runs on, unseen, so that its own usage is counted (ms). */
  readonly usageWaitMs: number;
  /** Stops probing an unavailable Redis. For shutdown. */
  close(): void;
}

/**
 * Builds the governance services on the host's Redis (shared counters) and system repositories (policies, and the
 * stored replies budget counters start from: `categorySystem` names their category).
 */
export function createGovernance(
  host: Pick<FhirgateHost, 'redis' | 'logger' | 'getSystemRepo'>,
  options: GovernanceOptions,
  redisKeyPrefix: string,
  telemetry: Telemetry,
  categorySystem: string,
): Governance {
  const prices = modelPricesOf(options.prices);
  const counters = new BudgetCounters({
    redis: host.redis,
    keyPrefix: redisKeyPrefix,
    refreshMs: options.budgetRefreshMs,
    maxAgeMs: options.budgetMaxAgeMs,
    logger: host.logger,
    seeder: storedRepliesSeeder((projectId) => host.getSystemRepo(projectId), categorySystem),
  });
  return {
    settings: new ProjectGovernanceSettings(prices),
    modelAccess: new ModelAccess({ systemRepo: (projectId) => host.getSystemRepo(projectId), telemetry, policyCacheMs: options.accessPolicyCacheMs }),
    budgets: new Budgets(counters, telemetry),
    counters,
    usageWaitMs: options.usageWaitMs,
    close: () => counters.close(),
  };
}

/**
 * Pipeline step: the model the request resolved to, if the caller may use it (its fallbacks narrowed to those the
 * caller may use); 403 `model_not_allowed` otherwise, before anything is stored or sent.
 */
export async function checkModelAccess(governance: Governance, caller: CallerContext, requested: string | undefined, target: ResolvedModel): Promise<ResolvedModel> {
  return governance.modelAccess.check(caller, governance.settings.of(caller.project), requested, target);
}

/**
 * Pipeline step: 429 when a budget of the project or of the caller is used up, or taken up by the turns still
 * running; otherwise what reserves the turn's likely cost (`reservation`) and settles it.
 */
export async function checkBudgets(governance: Governance, caller: CallerContext, reservation: TurnReservation): Promise<TurnBudget> {
  return governance.budgets.check(caller, governance.settings.of(caller.project), reservation);
}
