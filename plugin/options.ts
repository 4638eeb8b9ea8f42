/**
 * The plugin's options, validated once by `createFhirgatePlugin` and passed down. No global configuration:
 * two plugin instances in one process (as in the tests) never share settings.
 */
import { z } from 'zod';
import { DEFAULT_CATEGORY_SYSTEM } from './chat/fhir-vocabulary.ts';
import { PATIENT_CONTEXT_MODES, PATIENT_CONTEXT_TYPES } from './chat/patient-context.ts';
import { deviceAuthSchema } from './devices/device-auth-config.ts';
import { governanceOptionsSchema } from './governance/governance-options.ts';
import { DEFAULT_MAX_JSON_DEPTH } from './http/json-body.ts';
import { DEFAULT_MAX_UNAUTHENTICATED_REQUESTS } from './http/unauthenticated-requests.ts';
import { providerConfigSchema } from './llm/provider-config.ts';

/** MCP requests one caller may make per minute unless configured otherwise: an agent's steady work, not a loop. */
export const DEFAULT_MCP_REQUESTS_PER_MINUTE = 120;

/** Schema of the options a server passes to `createFhirgatePlugin`. */
export const fhirgateOptionsSchema = z
  .object({
    /** Largest JSON body the plugin's routes accept; larger bodies get 413 before they are parsed. */
    maxBodyBytes: z.number().int().positive().default(1024 * 1024),
    /** Most arrays and objects a JSON body may nest in one another; a deeper body gets 400 before anything else. */
    maxJsonDepth: z.number().int().min(1).max(10_000).default(DEFAULT_MAX_JSON_DEPTH),
    /**
     * Requests this instance works on at once before anyone is authenticated (the device token exchange reads its
     * body to learn who calls); beyond it they get 429 with Retry-After at once (http/unauthenticated-requests.ts).
     */
    maxUnauthenticatedRequests: z.number().int().positive().default(DEFAULT_MAX_UNAUTHENTICATED_REQUESTS),
    /** LLM providers and models (`plugin/llm/provider-config.ts`); without it the chat routes answer 503. */
    llm: providerConfigSchema.optional(),
    /** The spec's `device_auth`: device keys, token signing and expiry, the devices' project (`devices/device-auth-config.ts`). Without it the device routes answer 503. */
    device_auth: deviceAuthSchema.optional(),
    /** `/graphql`: introspection is off unless turned on here. */
    graphql: z.object({ introspection: z.boolean().default(false) }).strict().prefault({}),
    /** The `system` of the category codes `ai-conversation`, `ai-prompt`, `ai-response`. */
    categorySystem: z.string().min(1).default(DEFAULT_CATEGORY_SYSTEM),
    /** Names the service operator in `owned_by` of the model list. */
    operatorName: z.string().min(1).default('fhirgate'),
    /**
     * Sends each non-streaming chat answer's FHIR repository operations (reads, searches, writes the turn asked of
     * the server) in the `X-Fhirgate-Repository-Operations` header, for measuring what a turn costs the server
     * (telemetry/repository-operations.ts). Off by default: the log line and metrics carry them anyway.
     */
    reportRepositoryOperations: z.boolean().default(false),
    /** Name of the AI agent's Device, the sender of every reply. */
    agentDeviceName: z.string().min(1).default('fhirgate AI agent'),
    /** At shutdown (`plugin.close()`), how long chat turns in flight may run on before they are stopped. */
    shutdownGraceMs: z.number().int().min(0).default(10_000),
    /**
     * A directory for the reply journal (instances may share it: each keeps a subdirectory under a lease), holding what is needed to record
     * the reply of a turn the process was running when it died, and replies the store did not take yet
     * (chat/reply-journal.ts). Without it, both are kept in memory only.
     */
    replyJournalDir: z.string().min(1).optional(),
    /**
     * Prefix of the keys fhirgate keeps in the host's Redis (the turns of each instance: chat/turn-registry.ts).
     * Instances of one server share it; give deployments that share one Redis different prefixes.
     */
    redisKeyPrefix: z.string().min(1).max(100).default('fhirgate:'),
    /** Bounds on each chat request and caller; beyond them a request is refused before anything is stored. */
    chatLimits: z
      .object({
        /** Most messages in one request (400 beyond). */
        maxMessages: z.number().int().positive().default(1000),
        /** Largest `max_tokens` a request may ask for (400 beyond). */
        maxTokens: z.number().int().positive().default(32_768),
        /** Streams one caller (project and profile) may have open on this instance at once (429 beyond). */
        maxConcurrentStreams: z.number().int().positive().default(8),
        /** Non-streaming turns one caller may have running on this instance at once (429 beyond). */
        maxConcurrentTurns: z.number().int().positive().default(16),
        /**
         * Turns this instance prepares at once (authentication to the provider call: chat/turn-admission.ts); more
         * wait their turn, first come first served.
         */
        maxPreparingTurns: z.number().int().positive().default(32),
      })
      .strict()
      .prefault({}),
    /**
     * Bounds on the MCP endpoint per caller (project and profile), besides `chatLimits.maxConcurrentTurns` running
     * at once: `requestsPerMinute` across all instances (counted in the host's Redis; 429 with Retry-After beyond).
     */
    mcpLimits: z
      .object({ requestsPerMinute: z.number().int().positive().default(DEFAULT_MCP_REQUESTS_PER_MINUTE) })
      .strict()
      .prefault({}),
    /**
     * The OAuth authorization server the MCP endpoint's metadata names (RFC 9728): a Medplum server's `issuer`
     * (docs/mounting.md passes `config.issuer`). MCP clients that sign the user in check it against the server's
     * own metadata, so it must be the issuer exactly. Unset: the origin each request came to.
     */
    mcpAuthorizationServer: z.url({ protocol: /^https?$/ }).optional(),
    /**
     * Patient context (chat/patient-context.ts, chat/fhir-tools.ts): a turn about a patient shares the chart, read
     * with the caller's permissions, as a summary sent with the prompt, as FHIR tools the model may call, or both
     * (`mode`, the default of turns that do not say). `resourceTypes`: which clinical types may be shared (minimum
     * necessary), by either.
     */
    patientContext: z
      .object({
        enabled: z.boolean().default(true),
        mode: z.enum(PATIENT_CONTEXT_MODES).default('summary'),
        resourceTypes: z.array(z.enum(PATIENT_CONTEXT_TYPES)).default([...PATIENT_CONTEXT_TYPES]),
        maxPerType: z.number().int().min(1).max(100).default(10),
        // Kept on the reply's record as one FHIR string, which may not pass 1 MiB.
        maxCharacters: z.number().int().min(200).max(500_000).default(8000),
        /** FHIR tools: rounds of calls per reply, records per search, characters per result. */
        tools: z
          .object({
            maxSteps: z.number().int().min(1).max(20).default(4),
            maxResults: z.number().int().min(1).max(100).default(20),
            maxCharacters: z.number().int().min(200).max(500_000).default(8000),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    /** Governance (docs/governance.md): model prices, and how fresh each instance's view of the rules and budget counters is. */
    governance: governanceOptionsSchema.prefault({}),
    /**
     * De-identification of turns about a patient sent to a model not cleared for patient data, where a project
     * chooses it (governance/). `dateShiftKey`: the secret each conversation's date shift is derived from (an HMAC
     * of the project and the conversation); instances of one server share it. Without it such turns answer 503.
     */
    deIdentification: z
      .object({ dateShiftKey: z.string().min(32, 'at least 32 characters').optional() })
      .strict()
      .prefault({}),
    /** History sent with a continued conversation: the newest messages within both limits. */
    history: z
      .object({
        maxMessages: z.number().int().min(0).default(50),
        maxCharacters: z.number().int().min(0).default(100_000),
      })
      .prefault({}),
    /**
     * The web app (sign-in and chat) under `/fhirgate/app/` (web-app-route.ts, docs/app.md); `false` leaves that
     * path to the server.
     */
    webApp: z.boolean().default(true),
  })
  .strict();

/** Options as a server writes them (defaults may be left out). */
export type FhirgateOptionsInput = z.input<typeof fhirgateOptionsSchema>;

/** Options after validation, with every default filled in. */
export type FhirgateOptions = z.output<typeof fhirgateOptionsSchema>;

/** Validates options; a wrong option stops start-up with a message naming it (never a secret's value). */
export function parseFhirgateOptions(input: FhirgateOptionsInput = {}): FhirgateOptions {
  const result = fhirgateOptionsSchema.safeParse(input);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `${issue.path.join('.') || '(options)'}: ${issue.message}`);
    throw new Error(`Invalid fhirgate options: ${problems.join('; ')}`);
  }
  return result.data;
}
