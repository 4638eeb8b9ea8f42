/**
 * The optional fields of OpenAI's chat-completions request body, each with what fhirgate does with it: read into
 * the provider-neutral `ChatGenerationOptions` (each adapter then sends it on under its provider's name, or refuses
 * it by name before anything is stored), passed as it is to OpenAI-style providers, or refused here because
 * fhirgate cannot deliver what it asks for. A field fhirgate does not know goes to the provider's check (passed on
 * where the provider's operator listed it in `passThroughFields`, refused by name otherwise): nothing a client sends
 * is dropped on the way. docs/api.md has the whole table, per provider.
 */
import { z } from 'zod';
import { REASONING_EFFORTS, type ChatGenerationOptions, type ChatResponseFormat } from '../llm/chat-model.ts';

/** A schema that refuses its field with `message` whenever it is present and not null. */
function refused(message: string) {
  return z
    .unknown()
    .refine((value) => value === null, { message })
    .optional();
}

/**
 * OpenAI's response formats. A `schema` beside `json_object` is no field of OpenAI's: JSON mode constrained by a
 * schema, as OpenAI-compatible servers take it (llama.cpp's server, vLLM, LiteLLM; `instructor`'s JSON_SCHEMA mode
 * sends it). It is read here, like `top_k`, and each provider passes it on or refuses it by name (docs/api.md).
 */
const responseFormatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }).strict(),
  z.object({ type: z.literal('json_object'), schema: z.record(z.string(), z.unknown()).optional() }).strict(),
  z
    .object({
      type: z.literal('json_schema'),
      json_schema: z
        .object({
          name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -'),
          description: z.string().optional(),
          schema: z.record(z.string(), z.unknown()).optional(),
          strict: z.boolean().nullish(),
        })
        .strict(),
    })
    .strict(),
]);

/** OpenAI's `metadata`: at most 16 pairs of strings, keys up to 64 characters, values up to 512. */
const metadataSchema = z
  .record(z.string().max(64, 'keys are at most 64 characters'), z.string().max(512, 'values are at most 512 characters'))
  .refine((value) => Object.keys(value).length <= 16, 'at most 16 keys');

/**
 * Fields only OpenAI's API has: OpenAI-style providers (OpenAI, Azure OpenAI, OpenAI-compatible servers) receive
 * them as they are, in `ChatGenerationOptions.openAiOnly`; Anthropic and Ollama refuse them by name.
 */
export const OPENAI_ONLY_FIELDS = {
  service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority', 'fast']),
  prediction: z.object({ type: z.literal('content'), content: z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() }).strict())]) }).strict(),
  verbosity: z.enum(['low', 'medium', 'high']),
  prompt_cache_key: z.string(),
  prompt_cache_retention: z.enum(['in_memory', '24h']),
  prompt_cache_options: z.record(z.string(), z.unknown()),
  moderation: z.record(z.string(), z.unknown()),
} as const;

const OPENAI_ONLY_NAMES = Object.keys(OPENAI_ONLY_FIELDS);

/** The optional generation fields, as the request schema checks them (null counts as absent, as OpenAI's does). */
export const generationFields = {
  top_p: z.number().min(0).max(1).optional(),
  // Not an OpenAI field: Anthropic, Ollama and many OpenAI-compatible servers take it.
  top_k: z.number().int().positive().optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4, 'at most 4 sequences')]).optional(),
  seed: z.number().int().optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  logit_bias: z.record(z.string().regex(/^\d+$/, 'keys are token ids'), z.number().min(-100).max(100)).optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: responseFormatSchema.optional(),
  // One reply per turn is what a conversation continues from and what the record holds (docs/api.md).
  n: z.number().int().min(1).max(1, 'fhirgate answers and records one choice per request: n must be 1').optional(),
  logprobs: z.boolean().optional(),
  top_logprobs: z.number().int().min(0).max(20).optional(),
  reasoning_effort: z.enum(REASONING_EFFORTS).optional(),
  user: z.string().optional(),
  safety_identifier: z.string().optional(),
  store: z.boolean().optional(),
  metadata: metadataSchema.optional(),
  modalities: z.array(z.enum(['text', 'audio'])).refine((value) => !value.includes('audio'), 'only text: fhirgate neither returns nor records audio').optional(),
  audio: refused('fhirgate neither returns nor records audio output'),
  functions: refused('deprecated by OpenAI and not supported: use tools'),
  function_call: refused('deprecated by OpenAI and not supported: use tool_choice'),
  web_search_options: refused("not supported: the search results' citations would not reach you nor the record"),
  ...Object.fromEntries(Object.entries(OPENAI_ONLY_FIELDS).map(([name, schema]) => [name, schema.optional()])),
};

/** The generation fields of a request, as the schema above let them through. */
export interface GenerationFields {
  readonly top_p?: number;
  readonly top_k?: number;
  readonly stop?: string | string[];
  readonly seed?: number;
  readonly presence_penalty?: number;
  readonly frequency_penalty?: number;
  readonly logit_bias?: Record<string, number>;
  readonly parallel_tool_calls?: boolean;
  readonly response_format?: z.output<typeof responseFormatSchema>;
  readonly logprobs?: boolean;
  readonly top_logprobs?: number;
  readonly reasoning_effort?: (typeof REASONING_EFFORTS)[number];
  readonly user?: string;
  readonly safety_identifier?: string;
  readonly store?: boolean;
  readonly metadata?: Record<string, string>;
  readonly [name: string]: unknown;
}

/** A problem with a field's value that the schema cannot see: the field, and why. */
export interface FieldProblem {
  readonly param: string;
  readonly message: string;
}

/** The generation options of a parsed request, or the first field whose value conflicts with another. */
export function readGenerationOptions(fields: GenerationFields): ChatGenerationOptions | FieldProblem {
  if (fields.top_logprobs !== undefined && fields.logprobs !== true) {
    return { param: 'top_logprobs', message: 'top_logprobs: only with logprobs: true.' };
  }
  const stop = typeof fields.stop === 'string' ? [fields.stop] : fields.stop;
  const openAiOnly: Record<string, unknown> = {};
  for (const name of OPENAI_ONLY_NAMES) {
    if (fields[name] !== undefined) {
      openAiOnly[name] = fields[name];
    }
  }
  const endUser = fields.user !== undefined || fields.safety_identifier !== undefined ? { user: fields.user, safetyIdentifier: fields.safety_identifier } : undefined;
  return withoutUndefined({
    topP: fields.top_p,
    topK: fields.top_k,
    stop: stop?.length ? stop : undefined,
    seed: fields.seed,
    presencePenalty: fields.presence_penalty,
    frequencyPenalty: fields.frequency_penalty,
    logitBias: fields.logit_bias,
    parallelToolCalls: fields.parallel_tool_calls,
    responseFormat: toResponseFormat(fields.response_format),
    logprobs: fields.logprobs ? { top: fields.top_logprobs ?? 0 } : undefined,
    reasoningEffort: fields.reasoning_effort,
    endUser,
    store: fields.store,
    metadata: fields.metadata,
    openAiOnly: Object.keys(openAiOnly).length > 0 ? openAiOnly : undefined,
  });
}

// `text` is every provider's default: nothing to send.
function toResponseFormat(format: GenerationFields['response_format']): ChatResponseFormat | undefined {
  switch (format?.type) {
    case 'json_object':
      return format.schema ? { type: 'json_object', schema: format.schema } : { type: 'json_object' };
    case 'json_schema': {
      const { name, description, schema, strict } = format.json_schema;
      return withoutUndefined({ type: 'json_schema' as const, name, description, schema, strict: strict ?? undefined });
    }
    default:
      return undefined;
  }
}

/** `value` without its undefined fields. A plain loop: this runs for every request, and Object.entries and fromEntries cost more. */
function withoutUndefined<T extends object>(value: T): T {
  const kept: Partial<T> = {};
  for (const name in value) {
    if (value[name] !== undefined) {
      kept[name] = value[name];
    }
  }
  return kept as T;
}
