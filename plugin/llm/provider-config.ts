/**
 * Which LLM providers fhirgate talks to: a zod schema for named providers, and the reading of the spec's
 * environment variables (AI_PROVIDER, AI_MODEL, AI_API_KEY, AI_API_BASE, AI_MAX_TOKENS, plus AI_API_VERSION,
 * AI_MODELS and AI_TIMEOUT_MS) into it. Validation messages name the field or variable, never a value: a wrong
 * setting must not print the API key next to it.
 */
import { z } from 'zod';
import { patientDataModelProblems } from '../governance/patient-data-settings.ts';

/** The kinds of provider fhirgate has an adapter for. */
export const PROVIDER_KINDS = ['openai', 'azure-openai', 'anthropic', 'ollama', 'openai-compatible'] as const;

/** A kind of provider. */
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** The Azure OpenAI `api-version` used when none is configured (the data-plane GA version of 2024-10-21). */
export const DEFAULT_AZURE_API_VERSION = '2024-10-21';

const DEFAULT_TIMEOUT_MS = 120_000;
const DEFAULT_MAX_RETRIES = 2;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_TOKENS = 4096;
// Kinds whose adapter cannot work without a key (a per-project key supplied at resolve time also counts).
const KINDS_NEEDING_A_KEY: ReadonlySet<ProviderKind> = new Set(['openai', 'azure-openai', 'anthropic']);
const KINDS_NEEDING_A_BASE_URL: ReadonlySet<ProviderKind> = new Set(['azure-openai', 'openai-compatible']);
// The kinds whose adapter can send a field it does not know as it is (the openai SDK's body takes any key).
const KINDS_PASSING_FIELDS_THROUGH: ReadonlySet<ProviderKind> = new Set(['openai', 'azure-openai', 'openai-compatible']);

/**
 * The top-level request fields fhirgate does not know that a provider receives when its settings list none: none.
 * A gateway behind the provider may read such fields as its own instructions (LiteLLM's `fallbacks`, `user_config`,
 * `api_base`; vLLM's `chat_template`) and send the turn elsewhere, past fhirgate's governance, so each one the
 * operator wants passed on is listed by name in `passThroughFields`.
 */
export const DEFAULT_PASS_THROUGH_FIELDS: readonly string[] = [];
/** The shape of a field name `passThroughFields` may list. */
const FIELD_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** Schema of one provider's settings. */
export const providerSettingsSchema = z
  .object({
    kind: z.enum(PROVIDER_KINDS),
    /** Secret. Optional for every kind: callers may supply per-project keys (see `ModelRegistry.resolve`). */
    apiKey: z.string().min(1).optional(),
    /** The provider's base URL; Azure: the resource endpoint. Required for azure-openai and openai-compatible. */
    baseUrl: z.url({ protocol: /^https?$/ }).optional(),
    /** Azure's `api-version`; defaults to DEFAULT_AZURE_API_VERSION for azure-openai. */
    apiVersion: z.string().min(1).optional(),
    /** Longest wait for the provider: a whole reply, or the next event of a stream. */
    timeoutMs: z.number().int().positive().default(DEFAULT_TIMEOUT_MS),
    /** Longest wait to establish a connection to the provider, TCP and TLS (default 10 s). */
    connectTimeoutMs: z.number().int().positive().default(DEFAULT_CONNECT_TIMEOUT_MS),
    /** Streams: longest wait for the response and its first event (default `timeoutMs`). */
    firstTokenTimeoutMs: z.number().int().positive().optional(),
    /** Longest a whole call may take, however it goes (default: no limit beyond the others). */
    totalTimeoutMs: z.number().int().positive().optional(),
    /**
     * Retries of a failed call that may pass (429, 5xx, timeouts, lost connections), only before any byte of the
     * reply reached the client: after `baseDelayMs`, doubling, or the provider's `Retry-After`; a `Retry-After`
     * longer than `maxDelayMs` is not waited for (the next fallback model is tried, or the client told).
     */
    retries: z
      .object({
        maxRetries: z.number().int().min(0).max(10).default(DEFAULT_MAX_RETRIES),
        baseDelayMs: z.number().int().min(0).default(250),
        maxDelayMs: z.number().int().min(0).default(10_000),
      })
      .strict()
      .prefault({}),
    /** OpenAI-style kinds only: the field that carries the token cap (see `openai-chat-model.ts`). */
    maxTokensParameter: z.enum(['max_tokens', 'max_completion_tokens']).optional(),
    /**
     * OpenAI-style kinds only: the top-level request fields fhirgate does not know (a server's own extensions, such
     * as vLLM's `min_p`) that this provider receives as sent; a request with any other such field is refused by
     * name. Default `DEFAULT_PASS_THROUGH_FIELDS` (none).
     */
    passThroughFields: z.array(z.string().regex(FIELD_NAME_PATTERN, 'each must be a field name: letters, digits and _')).max(100).optional(),
    /** The models (Azure: deployments) offered, without the provider prefix. */
    models: z.array(z.string().trim().min(1)).min(1),
  })
  .strict()
  .superRefine((settings, context) => {
    if (KINDS_NEEDING_A_BASE_URL.has(settings.kind) && settings.baseUrl === undefined) {
      context.addIssue({ code: 'custom', path: ['baseUrl'], message: `is required for kind ${settings.kind}` });
    }
    if (settings.passThroughFields?.length && !KINDS_PASSING_FIELDS_THROUGH.has(settings.kind)) {
      context.addIssue({ code: 'custom', path: ['passThroughFields'], message: `is for OpenAI-style kinds only: ${settings.kind} takes no fields fhirgate does not know` });
    }
  })
  .transform((settings) =>
    settings.kind === 'azure-openai' ? { ...settings, apiVersion: settings.apiVersion ?? DEFAULT_AZURE_API_VERSION } : settings,
  );

/** Schema of the provider configuration. */
export const providerConfigSchema = z
  .object({
    /** Providers by name; the name is the `provider` part of `provider/model` ids. */
    providers: z.record(
      z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'provider names use letters, digits, ".", "_" and "-"'),
      providerSettingsSchema,
    ),
    /** `provider/model`, used when a request names no model. */
    defaultModel: z.string().min(1),
    /** Reply length cap when a request sets no `max_tokens`. */
    maxTokens: z.number().int().positive().default(DEFAULT_MAX_TOKENS),
    /**
     * Models to try, in order, when a model's provider keeps failing with a failure that may pass (after its
     * retries), before any byte reached the client: `{ "openai/gpt-4o": ["anthropic/claude-sonnet-4-5"] }`.
     */
    fallbacks: z.record(z.string().min(1), z.array(z.string().min(1)).min(1)).default({}),
    /**
     * The models cleared for patient data on the server's own provider accounts (an agreement, BAA or DPA, with the
     * provider covers them): `provider/model` or `provider/*`. Default none: a turn about a patient on another
     * model is refused, or de-identified where a project chooses (governance/patient-data-settings.ts).
     */
    patientDataModels: z.array(z.string().trim().min(1)).default([]),
    /**
     * Where the operator sets `patientDataModels`, as a refusal and the start-up warning name it to the people who
     * read them; default `the plugin option llm.patientDataModels`. readProviderConfigFromEnvironment sets it to the
     * variable it read.
     */
    patientDataModelsSetting: z.string().trim().min(1).max(200).optional(),
  })
  .strict()
  .superRefine((config, context) => {
    const names = Object.keys(config.providers);
    if (names.length === 0) {
      context.addIssue({ code: 'custom', path: ['providers'], message: 'needs at least one provider' });
      return;
    }
    const configured = (id: string): boolean => {
      const slash = id.indexOf('/');
      const provider = config.providers[id.slice(0, slash)];
      return slash !== -1 && provider !== undefined && provider.models.includes(id.slice(slash + 1));
    };
    if (!configured(config.defaultModel)) {
      context.addIssue({ code: 'custom', path: ['defaultModel'], message: 'must be provider/model, naming a configured model' });
    }
    for (const problem of patientDataModelProblems(config.patientDataModels, config.providers)) {
      context.addIssue({ code: 'custom', path: ['patientDataModels'], message: problem });
    }
    for (const [model, fallbacks] of Object.entries(config.fallbacks)) {
      for (const id of [model, ...fallbacks]) {
        if (!configured(id)) {
          context.addIssue({ code: 'custom', path: ['fallbacks', model], message: `'${id.slice(0, 100)}' must be provider/model, naming a configured model` });
        }
      }
    }
  });

/** The configuration as written (defaults may be left out). */
export type ProviderConfigInput = z.input<typeof providerConfigSchema>;

/** The validated configuration, with every default filled in. */
export type ProviderConfig = z.output<typeof providerConfigSchema>;

/** One provider's validated settings. */
export type ProviderSettings = z.output<typeof providerSettingsSchema>;

/** True for kinds that cannot be called without an API key. */
export function needsApiKey(kind: ProviderKind): boolean {
  return KINDS_NEEDING_A_KEY.has(kind);
}

/**
 * Validates a configuration; throws an Error listing each problem by its path (or, through `nameField`, by the
 * setting it came from), never by its value.
 */
export function parseProviderConfig(
  input: unknown,
  nameField: (path: readonly PropertyKey[]) => string = (path) => path.map(String).join('.') || '(configuration)',
): ProviderConfig {
  const result = providerConfigSchema.safeParse(input);
  if (!result.success) {
    throw createConfigError(result.error.issues.map((issue) => `${nameField(issue.path)}: ${issue.message}`));
  }
  return result.data;
}

/** The values of AI_PROVIDER, one per kind. */
const KIND_BY_ENVIRONMENT_NAME: Readonly<Record<string, ProviderKind>> = {
  openai: 'openai',
  azure: 'azure-openai',
  anthropic: 'anthropic',
  ollama: 'ollama',
  'openai-compatible': 'openai-compatible',
};

// Which variable each configuration field comes from, so a schema problem names the variable to fix.
const VARIABLE_BY_FIELD: Readonly<Record<string, string>> = {
  apiKey: 'AI_API_KEY',
  baseUrl: 'AI_API_BASE',
  apiVersion: 'AI_API_VERSION',
  timeoutMs: 'AI_TIMEOUT_MS',
  firstTokenTimeoutMs: 'AI_FIRST_TOKEN_TIMEOUT_MS',
  connectTimeoutMs: 'AI_CONNECT_TIMEOUT_MS',
  totalTimeoutMs: 'AI_TOTAL_TIMEOUT_MS',
  retries: 'AI_MAX_RETRIES',
  models: 'AI_MODELS',
  defaultModel: 'AI_MODEL',
  patientDataModels: 'AI_PATIENT_DATA_MODELS',
  maxTokens: 'AI_MAX_TOKENS',
  passThroughFields: 'AI_PASS_THROUGH_FIELDS',
};

/**
 * Reads the spec's provider variables: AI_PROVIDER (openai, azure, anthropic, ollama or openai-compatible; it is
 * also the provider's name in `provider/model` ids), AI_MODEL (the default model, with or without that prefix),
 * AI_API_KEY (required for openai, azure and anthropic), AI_API_BASE (required for azure, its resource endpoint,
 * and openai-compatible), AI_MAX_TOKENS (default 4096), AI_API_VERSION (azure), AI_MODELS (more models, comma
 * separated), AI_TIMEOUT_MS (default 120000), AI_CONNECT_TIMEOUT_MS (default 10000), AI_FIRST_TOKEN_TIMEOUT_MS, AI_TOTAL_TIMEOUT_MS and AI_MAX_RETRIES
 * (default 2), AI_PATIENT_DATA_MODELS (the models cleared for patient data, comma separated, `provider/model`
 * or `*` for all of this provider's; with or without the `provider/` prefix), and AI_PASS_THROUGH_FIELDS (the
 * request fields fhirgate does not know that the provider receives, comma separated; default none). Returns
 * undefined when AI_PROVIDER is unset; throws an Error naming each wrong variable otherwise.
 */
export function readProviderConfigFromEnvironment(
  environment: Readonly<Record<string, string | undefined>>,
): ProviderConfig | undefined {
  const provider = readVariable(environment, 'AI_PROVIDER');
  if (provider === undefined) {
    return undefined;
  }
  const kind = KIND_BY_ENVIRONMENT_NAME[provider];
  if (kind === undefined) {
    throw createConfigError([`AI_PROVIDER must be one of ${Object.keys(KIND_BY_ENVIRONMENT_NAME).join(', ')}`]);
  }
  const problems: string[] = [];
  const apiKey = readVariable(environment, 'AI_API_KEY');
  if (apiKey === undefined && needsApiKey(kind)) {
    problems.push(`AI_API_KEY is required when AI_PROVIDER is ${provider}`);
  }
  const baseUrl = readVariable(environment, 'AI_API_BASE');
  if (baseUrl === undefined && KINDS_NEEDING_A_BASE_URL.has(kind)) {
    problems.push(`AI_API_BASE is required when AI_PROVIDER is ${provider}`);
  }
  const maxTokens = readPositiveInteger(environment, 'AI_MAX_TOKENS', problems);
  const timeoutMs = readPositiveInteger(environment, 'AI_TIMEOUT_MS', problems);
  const firstTokenTimeoutMs = readPositiveInteger(environment, 'AI_FIRST_TOKEN_TIMEOUT_MS', problems);
  const connectTimeoutMs = readPositiveInteger(environment, 'AI_CONNECT_TIMEOUT_MS', problems);
  const totalTimeoutMs = readPositiveInteger(environment, 'AI_TOTAL_TIMEOUT_MS', problems);
  const maxRetriesText = readVariable(environment, 'AI_MAX_RETRIES');
  const maxRetries = maxRetriesText === undefined ? undefined : /^\d{1,2}$/.test(maxRetriesText) ? Number(maxRetriesText) : Number.NaN;
  if (Number.isNaN(maxRetries)) {
    problems.push('AI_MAX_RETRIES must be a whole number from 0 to 10');
  }
  // A prefix is only taken off when it names this provider: "anthropic/claude-x" is a valid model name on an
  // OpenAI-compatible router, and Ollama names such as "library/llama3" contain slashes too.
  const stripPrefix = (model: string): string => (model.startsWith(`${provider}/`) ? model.slice(provider.length + 1) : model);
  const extraModels = (readVariable(environment, 'AI_MODELS') ?? '')
    .split(',')
    .map((model) => stripPrefix(model.trim()))
    .filter((model) => model !== '');
  const defaultModel = readVariable(environment, 'AI_MODEL');
  const defaultModelName = defaultModel === undefined ? extraModels[0] : stripPrefix(defaultModel);
  if (defaultModelName === undefined || defaultModelName === '') {
    problems.push('AI_MODEL is required when AI_PROVIDER is set');
  }
  if (problems.length > 0 || defaultModelName === undefined) {
    throw createConfigError(problems);
  }

  const input: ProviderConfigInput = {
    providers: {
      [provider]: {
        kind,
        apiKey,
        baseUrl,
        apiVersion: kind === 'azure-openai' ? readVariable(environment, 'AI_API_VERSION') : undefined,
        timeoutMs,
        firstTokenTimeoutMs,
        totalTimeoutMs,
        connectTimeoutMs,
        retries: maxRetries === undefined ? undefined : { maxRetries },
        models: [...new Set([defaultModelName, ...extraModels])],
        passThroughFields: readList(environment, 'AI_PASS_THROUGH_FIELDS'),
      },
    },
    defaultModel: `${provider}/${defaultModelName}`,
    maxTokens,
    patientDataModels: (readVariable(environment, 'AI_PATIENT_DATA_MODELS') ?? '')
      .split(',')
      .map((model) => model.trim())
      .filter((model) => model !== '')
      .map((model) => `${provider}/${stripPrefix(model)}`),
    patientDataModelsSetting: "AI_PATIENT_DATA_MODELS in the server's environment",
  };
  return parseProviderConfig(input, (path) => {
    const field = String(path.at(path[0] === 'providers' ? 2 : 0) ?? '');
    return VARIABLE_BY_FIELD[field] ?? 'AI_PROVIDER';
  });
}

/** A comma-separated list; undefined when the variable is unset or lists nothing. */
function readList(environment: Readonly<Record<string, string | undefined>>, name: string): string[] | undefined {
  const items = (readVariable(environment, name) ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  return items.length > 0 ? items : undefined;
}

function readVariable(environment: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  const value = environment[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function readPositiveInteger(
  environment: Readonly<Record<string, string | undefined>>,
  name: string,
  problems: string[],
): number | undefined {
  const value = readVariable(environment, name);
  if (value === undefined) {
    return undefined;
  }
  const number = /^\d+$/.test(value) ? Number.parseInt(value, 10) : Number.NaN;
  if (!Number.isSafeInteger(number) || number < 1) {
    problems.push(`${name} must be a positive integer`);
    return undefined;
  }
  return number;
}

function createConfigError(problems: readonly string[]): Error {
  return new Error(`Invalid LLM provider configuration: ${problems.join('; ')}`);
}
