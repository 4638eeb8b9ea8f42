/**
 * The body of `POST /v1/responses`, validated: every field of OpenAI's Responses request is read, passed on or
 * refused by name, and a field nobody knows is refused too (docs/api.md has the table). The settings become the
 * same provider-neutral request a chat completion makes (`ChatGenerationOptions`); `input` is read in
 * response-input.ts.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';
import { presentFieldsParser } from '../http/present-fields.ts';
import { REASONING_EFFORTS, type ChatGenerationOptions, type ChatTool, type ChatToolChoice } from '../llm/chat-model.ts';
import { ID_PATTERN, MAX_TOOLS, readToolChoice, TOOL_NAME_PATTERN, type ChatRequestLimits } from '../chat/chat-request.ts';
import { OPENAI_ONLY_FIELDS, readGenerationOptions, type GenerationFields } from '../chat/chat-request-options.ts';
import { PATIENT_CONTEXT_MODES, type PatientContextMode } from '../chat/patient-context.ts';
import { readInputItems, type InputItem } from './response-input.ts';
import { replyIdOfResponse } from './response-object.ts';

/** The `include` values fhirgate honours: log probabilities, and reasoning (of which fhirgate returns none). */
export const LOGPROBS_INCLUDE = 'message.output_text.logprobs';
const INCLUDABLE = new Set([LOGPROBS_INCLUDE, 'reasoning.encrypted_content']);

/** A schema that refuses its field with `message` when it is present and not null. */
function refused(message: string) {
  return z
    .unknown()
    .refine((value) => value === null, { message })
    .optional();
}

const functionToolSchema = z
  .object({
    type: z.literal('function', 'only function tools are supported: fhirgate runs no hosted tools'),
    name: z.string().regex(TOOL_NAME_PATTERN, 'must be 1 to 64 letters, digits, _ or -'),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
    defer_loading: refused('tool search is not supported'),
    allowed_callers: refused('programmatic tool calling is not supported'),
    output_schema: refused('is not supported'),
    async: refused('is not supported'),
  })
  .strict();

const toolChoiceSchema = z.union(
  [z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), name: z.string() }).strict()],
  'must be none, auto, required or {type: "function", name}'
);

const formatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }).strict(),
  z.object({ type: z.literal('json_object') }).strict(),
  z
    .object({
      type: z.literal('json_schema'),
      name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -'),
      schema: z.record(z.string(), z.unknown()),
      description: z.string().nullish(),
      strict: z.boolean().nullish(),
    })
    .strict(),
]);

const conversationId = z.string().regex(ID_PATTERN, 'is not a conversation id');

/**
 * OpenAI's tiers, passed on as `service_tier` is on chat completions; `ultrafast`, a tier of OpenAI's Responses API
 * only, is refused by name: fhirgate asks every provider through its chat API, which has no such tier.
 */
const serviceTierSchema = z.enum(OPENAI_ONLY_FIELDS.service_tier.options, {
  error: (issue) =>
    issue.input === 'ultrafast'
      ? 'ultrafast is not supported: fhirgate asks providers through chat completions, which have no ultrafast tier'
      : `must be one of ${OPENAI_ONLY_FIELDS.service_tier.options.join(', ')}`,
});

/** The request body's schema; the OpenAPI description is generated from it too (plugin/openapi/). */
export const responsesSchema = z
  .object({
    model: z.string().min(1).optional(),
    input: z.union([z.string(), z.array(z.unknown()).min(1, 'must not be empty')], 'is required: a string or a list of items'),
    instructions: z.string().optional(),
    previous_response_id: z.string().refine((value) => replyIdOfResponse(value) !== undefined, 'is not the id of a response fhirgate gave (resp_...)').optional(),
    conversation: z.union([conversationId, z.object({ id: conversationId }).strict()]).optional(),
    stream: z.boolean().optional(),
    stream_options: z
      .object({ include_obfuscation: z.boolean().nullish().refine((value) => value !== true, 'fhirgate does not pad its stream') })
      .strict()
      .optional(),
    max_output_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    top_logprobs: z.number().int().min(0).max(20).optional(),
    include: z.array(z.string().refine((value) => INCLUDABLE.has(value), `fhirgate includes ${[...INCLUDABLE].join(' and ')} only`)).optional(),
    tools: z.array(functionToolSchema).max(MAX_TOOLS, `at most ${MAX_TOOLS} tools`).optional(),
    tool_choice: toolChoiceSchema.optional(),
    parallel_tool_calls: z.boolean().optional(),
    text: z.object({ format: formatSchema.nullish(), verbosity: OPENAI_ONLY_FIELDS.verbosity.nullish() }).strict().optional(),
    reasoning: z
      .object({
        effort: z.enum(REASONING_EFFORTS).nullish(),
        summary: refused('fhirgate returns no reasoning summaries'),
        generate_summary: refused('fhirgate returns no reasoning summaries'),
        context: refused('is not supported'),
        mode: refused('is not supported'),
      })
      .strict()
      .optional(),
    // fhirgate is the store: every turn is recorded, and readable with GET /v1/responses/{id}, whatever `store` says.
    store: z.boolean().optional(),
    metadata: z
      .record(z.string().max(64, 'keys are at most 64 characters'), z.string().max(512, 'values are at most 512 characters'))
      .refine((value) => Object.keys(value).length <= 16, 'at most 16 keys')
      .optional(),
    user: z.string().optional(),
    safety_identifier: z.string().optional(),
    truncation: z.enum(['auto', 'disabled']).optional(),
    service_tier: serviceTierSchema.optional(),
    prompt_cache_key: OPENAI_ONLY_FIELDS.prompt_cache_key.optional(),
    prompt_cache_retention: OPENAI_ONLY_FIELDS.prompt_cache_retention.optional(),
    prompt_cache_options: OPENAI_ONLY_FIELDS.prompt_cache_options.optional(),
    background: z.boolean().refine((value) => !value, 'fhirgate answers while the request waits: background responses are not supported').optional(),
    max_tool_calls: refused('is not supported: fhirgate runs no hosted tools'),
    prompt: refused('prompt templates are not supported: send instructions and input'),
    context_management: refused('is not supported'),
    moderation: refused("is not supported: its results would not reach you nor the record"),
    access_programs: refused('is not supported'),
    image: refused('is not supported: fhirgate sends and records text only'),
    // fhirgate's own fields, as on chat completions.
    patient_id: z.string().regex(ID_PATTERN, 'is not a valid id').optional(),
    patient_context: z.enum(PATIENT_CONTEXT_MODES).optional(),
  })
  .strict();

type ResponsesBody = z.output<typeof responsesSchema>;
/** The schema, checked only on the fields a body gives (http/present-fields.ts): a body gives few of its fields. */
const parseResponsesFields = presentFieldsParser(responsesSchema);

/** A Responses request read, before the records it names (previous response, referenced items) are read. */
export interface ResponsesDraft {
  readonly items: readonly InputItem[];
  readonly instructions?: string;
  readonly stream: boolean;
  readonly model?: string;
  /** The reply `previous_response_id` names. */
  readonly previousReplyId?: string;
  /** The conversation `conversation` names. */
  readonly conversationId?: string;
  readonly patientId?: string;
  readonly patientContext?: PatientContextMode;
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly tools?: readonly ChatTool[];
  readonly toolChoice?: ChatToolChoice;
  readonly options: ChatGenerationOptions;
  /** The body as the client sent it, for the prompt's record. */
  readonly body: Readonly<Record<string, unknown>>;
}

/** Validates a body; a bad one is a 400 naming the field as the Responses API names it. */
export function parseResponsesDraft(body: unknown, limits: ChatRequestLimits): ResponsesDraft {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('', 'The request body must be a JSON object.');
  }
  // OpenAI takes null for "not given" on every optional field; the body is still recorded as sent.
  const result = parseResponsesFields(Object.fromEntries(Object.entries(body).filter(([, value]) => value !== null)));
  if (!result.success) {
    throw fromIssue(result.issue);
  }
  const value = result.data;
  if (value.previous_response_id !== undefined && value.conversation !== undefined) {
    throw invalid('conversation', 'conversation: give previous_response_id or conversation, not both.');
  }
  if (Array.isArray(value.input) && value.input.length > limits.maxMessages) {
    throw invalid('input', `input: at most ${limits.maxMessages} items.`);
  }
  if (value.max_output_tokens !== undefined && value.max_output_tokens > limits.maxTokens) {
    throw invalid('max_output_tokens', `max_output_tokens: at most ${limits.maxTokens}.`);
  }
  const tools = value.tools?.length ? value.tools.map(toChatTool) : undefined;
  const choice = value.tool_choice;
  const toolChoice = readToolChoice(typeof choice === 'object' ? { type: 'function', function: { name: choice.name } } : choice, tools);
  const options = readOptions(value);
  return {
    items: readInputItems(value.input),
    instructions: value.instructions,
    stream: value.stream ?? false,
    model: value.model,
    previousReplyId: value.previous_response_id === undefined ? undefined : replyIdOfResponse(value.previous_response_id),
    conversationId: typeof value.conversation === 'object' ? value.conversation.id : value.conversation,
    patientId: value.patient_id,
    patientContext: value.patient_context,
    maxTokens: value.max_output_tokens,
    temperature: value.temperature,
    tools,
    toolChoice,
    options,
    body: body as Record<string, unknown>,
  };
}

/**
 * The settings the provider receives, read as the chat-completions fields they are there. `store` and `metadata`
 * are not among them: fhirgate is the response store, and keeps both in the prompt's record.
 */
function readOptions(value: ResponsesBody): ChatGenerationOptions {
  const logprobs = value.include?.includes(LOGPROBS_INCLUDE) ?? false;
  if (value.top_logprobs !== undefined && !logprobs) {
    throw invalid('top_logprobs', `top_logprobs: only with include: ["${LOGPROBS_INCLUDE}"].`);
  }
  const format = value.text?.format ?? undefined;
  const fields: GenerationFields = {
    top_p: value.top_p,
    parallel_tool_calls: value.parallel_tool_calls,
    response_format:
      format?.type === 'json_schema'
        ? { type: 'json_schema', json_schema: { name: format.name, schema: format.schema, ...(format.description ? { description: format.description } : {}), strict: format.strict } }
        : format,
    logprobs: logprobs || undefined,
    top_logprobs: logprobs ? value.top_logprobs : undefined,
    reasoning_effort: value.reasoning?.effort ?? undefined,
    user: value.user,
    safety_identifier: value.safety_identifier,
    verbosity: value.text?.verbosity ?? undefined,
    service_tier: value.service_tier,
    prompt_cache_key: value.prompt_cache_key,
    prompt_cache_retention: value.prompt_cache_retention,
    prompt_cache_options: value.prompt_cache_options,
  };
  const options = readGenerationOptions(fields);
  if ('param' in options) {
    throw invalid(options.param, options.message);
  }
  return options;
}

function toChatTool(tool: z.output<typeof functionToolSchema>): ChatTool {
  return {
    name: tool.name,
    ...(tool.description ? { description: tool.description } : {}),
    parameters: tool.parameters ?? { type: 'object', properties: {} },
    ...(typeof tool.strict === 'boolean' ? { strict: tool.strict } : {}),
  };
}

/** A zod issue as the 400 that names its field; an unknown field is named as such. */
function fromIssue(issue: z.core.$ZodIssue): AppError {
  const path = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    const param = [...path, issue.keys[0]].join('.');
    const hint = param === 'conversation_id' ? 'continue a conversation with conversation (its id) or previous_response_id' : 'see the Responses fields in docs/api.md';
    return invalid(param, `${param}: is not a field fhirgate knows; ${hint}.`);
  }
  const param = path.join('.');
  return invalid(param, `${param ? `${param}: ` : ''}${issue.message}`);
}

function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', `Invalid request: ${message}`, param ? { details: { param } } : {});
}
