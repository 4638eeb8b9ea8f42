/**
 * The chat completion request of the spec, validated: every field of OpenAI's request body is read, passed on or
 * refused by name (`chat-request-options.ts` has the optional ones). A top-level field fhirgate does not know is a
 * server's own extension: kept for the provider's check, which passes it on where the provider's operator listed it
 * (`passThroughFields`) and refuses it by name otherwise; an unknown field inside a message, tool or option is
 * refused here.
 * Beyond the spec's `system` and `user` messages, a request may carry OpenAI's `developer` messages, text parts,
 * and function calling: `tools`, `tool_choice`, assistant messages with `tool_calls` and `tool` messages with their
 * results. Parts other than text (images, audio, files) are refused by name: fhirgate records and sends text only.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';
import { presentFieldsParser } from '../http/present-fields.ts';
import type { ChatGenerationOptions, ChatMessage, ChatTool, ChatToolCall, ChatToolChoice } from '../llm/chat-model.ts';
import { generationFields, readGenerationOptions, type GenerationFields } from './chat-request-options.ts';
import { PATIENT_CONTEXT_MODES, type PatientContextMode } from './patient-context.ts';

/** A FHIR resource id, as `conversation_id` and `patient_id` take it. */
export const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;
/** OpenAI's rule for function names, which every provider accepts. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** OpenAI's own limit on the tools of one request. */
export const MAX_TOOLS = 128;

/** Text as the client sent it: one string, or parts (kept, for providers that take parts). */
interface ReadText {
  readonly text: string;
  readonly parts?: readonly string[];
}

const NON_TEXT_PARTS = new Set(['image_url', 'input_audio', 'file']);

/**
 * Message content: a string or a list of parts. `text` parts always; an assistant's `refusal` parts where
 * `withRefusals`. Other parts are refused by name. The text is the parts joined with nothing between them, as
 * OpenAI's models read them.
 */
function contentOf(withRefusals: boolean) {
  const part = z.object({ type: z.string() }).passthrough();
  return z.union([z.string(), z.array(part)]).transform((value, context): ReadText => {
    if (typeof value === 'string') {
      return { text: value };
    }
    const parts: string[] = [];
    for (const [index, item] of value.entries()) {
      const field = item.type === 'text' ? 'text' : item.type === 'refusal' && withRefusals ? 'refusal' : undefined;
      const problem = field === undefined ? partTypeProblem(item.type) : partProblem(item, field);
      if (problem !== undefined) {
        context.addIssue({ code: 'custom', message: problem.message, path: [index, problem.field] });
        return z.NEVER;
      }
      parts.push(String(item[field ?? 'text']));
    }
    return { text: parts.join(''), parts };
  });
}

function partTypeProblem(type: string): { field: string; message: string } {
  const message = NON_TEXT_PARTS.has(type) ? `${type} parts are not supported: fhirgate sends and records text only` : `'${type.slice(0, 32)}' is not a content part fhirgate accepts here`;
  return { field: 'type', message };
}

/** A text (or refusal) part must hold its text, and nothing else fhirgate would have to drop. */
function partProblem(item: Record<string, unknown>, field: 'text' | 'refusal'): { field: string; message: string } | undefined {
  if (typeof item[field] !== 'string') {
    return { field, message: 'must be a string' };
  }
  const other = Object.keys(item).find((key) => key !== 'type' && key !== field);
  return other === undefined ? undefined : { field: other, message: `${other.slice(0, 64)} is not supported on content parts` };
}
const textContent = contentOf(false);

/** A schema that refuses its field with `message` when it is present and not null. */
function refused(message: string) {
  return z
    .unknown()
    .refine((value) => value === null, { message })
    .optional();
}

/** A call's id: FHIR keeps it in a string, which is never blank. */
const callId = z.string().max(256).regex(/\S/, 'must not be empty');

const toolCallSchema = z
  .object({
    id: callId,
    type: z.literal('function', 'only function calls are supported').optional(),
    function: z.object({ name: z.string().regex(TOOL_NAME_PATTERN, 'is not a valid function name'), arguments: z.string() }).strict(),
  })
  .strict();

const participantName = z.string().min(1).max(64).optional();

const messageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.enum(['system', 'developer']), content: textContent, name: participantName }).strict(),
  z.object({ role: z.literal('user'), content: textContent, name: participantName }).strict(),
  z
    .object({
      role: z.literal('assistant'),
      content: contentOf(true).nullish(),
      refusal: z.string().nullish(),
      name: participantName,
      tool_calls: z.array(toolCallSchema).min(1).optional(),
      audio: refused('fhirgate keeps no audio replies to refer to'),
      function_call: refused('deprecated by OpenAI and not supported: use tool_calls'),
    })
    .strict(),
  z.object({ role: z.literal('tool'), content: textContent, tool_call_id: callId }).strict(),
  z.object({ role: z.literal('function') }).passthrough().refine(() => false, 'function messages are deprecated by OpenAI and not supported: use tool messages'),
]);

const toolSchema = z
  .object({
    type: z.literal('function', 'only function tools are supported'),
    function: z
      .object({
        name: z.string().regex(TOOL_NAME_PATTERN, 'must be 1 to 64 letters, digits, _ or -'),
        description: z.string().optional(),
        parameters: z.record(z.string(), z.unknown()).optional(),
        strict: z.boolean().nullish(),
      })
      .strict(),
  })
  .strict();

const toolChoiceSchema = z.union(
  [z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string() }).strict() }).strict()],
  'must be none, auto, required or {type: "function", function: {name}}'
);

/** The request body's schema; the OpenAPI description is generated from it too (plugin/openapi/). */
export const chatRequestSchema = z
  .object({
    messages: z.array(messageSchema).min(1, 'messages must not be empty'),
    stream: z.boolean().optional(),
    model: z.string().min(1).optional(),
    conversation_id: z.string().regex(ID_PATTERN, 'conversation_id is not a valid id').optional(),
    patient_id: z.string().regex(ID_PATTERN, 'patient_id is not a valid id').optional(),
    patient_context: z.enum(PATIENT_CONTEXT_MODES).optional(),
    max_tokens: z.number().int().positive().optional(),
    max_completion_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(2).optional(),
    stream_options: z
      .object({
        include_usage: z.boolean().nullish(),
        include_obfuscation: z.boolean().nullish().refine((value) => value !== true, 'fhirgate does not pad its stream'),
      })
      .strict()
      .optional(),
    tools: z.array(toolSchema).max(MAX_TOOLS, `at most ${MAX_TOOLS} tools`).optional(),
    tool_choice: toolChoiceSchema.optional(),
    ...generationFields,
  })
  .strict();

/** The top-level fields of OpenAI's request (and fhirgate's own) that fhirgate reads. */
const KNOWN_FIELDS: ReadonlySet<string> = new Set(Object.keys(chatRequestSchema.shape));
/** The schema, checked only on the fields a body gives (http/present-fields.ts): a body gives few of its fields. */
const parseChatFields = presentFieldsParser(chatRequestSchema);

/** A validated chat completion request. */
export interface ChatRequest {
  /** The request's messages, as the provider port takes them. */
  readonly messages: readonly ChatMessage[];
  /**
   * How many of `messages`, at their start, are instructions the request's API sends apart from its messages (the
   * Responses API's `instructions`): sent to the model first and recorded with the body, but not the turn's input
   * (turn-input.ts). Absent: none.
   */
  readonly instructionCount?: number;
  /** Tool results whose calls are not in this request: they answer the calls of the conversation's last reply. */
  readonly answersEarlierCalls: readonly string[];
  readonly stream: boolean;
  readonly model?: string;
  readonly conversationId?: string;
  readonly patientId?: string;
  /** How the chart is shared when the turn is about a patient; undefined: the project's default. */
  readonly patientContext?: PatientContextMode;
  /** `max_tokens`, or `max_completion_tokens` (the same bound: a request giving both must give one value). */
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly includeUsage: boolean;
  /** The client's own functions, passed to the model; calls to them come back to the client. */
  readonly tools?: readonly ChatTool[];
  readonly toolChoice?: ChatToolChoice;
  /** The optional OpenAI fields, for the provider (each adapter sends or refuses each one). */
  readonly options: ChatGenerationOptions;
  /** The body as the client sent it: recorded on the prompt, so an auditor sees exactly what was asked. */
  readonly body: Readonly<Record<string, unknown>>;
  /** Stored records the request takes in (a Responses `item_reference`): their patients are the turn's too. */
  readonly referenced?: readonly ReferencedRecord[];
}

/** A stored record a request takes in, read before anything of the turn is stored. */
export interface ReferencedRecord {
  /** `Communication/<id>`. */
  readonly reference: string;
  /** The patients it is about (`Patient/<id>`); none for a record about no patient. */
  readonly subjects: readonly string[];
  /** The field that named it, e.g. `input.2.id`. */
  readonly param: string;
}

/** Bounds on one request, so a single caller cannot make fhirgate or the provider do unbounded work. */
export interface ChatRequestLimits {
  /** Most messages in a request. */
  readonly maxMessages: number;
  /** Largest `max_tokens` (or `max_completion_tokens`) a request may ask for. */
  readonly maxTokens: number;
}

/** Validates a request body; a bad one is a 400 naming the field. */
export function parseChatRequest(body: unknown, limits: ChatRequestLimits = { maxMessages: 1000, maxTokens: 32_768 }): ChatRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('invalid_request', 'The request body must be a JSON object.');
  }
  // OpenAI takes null for "not given" on every optional field; the body is still recorded as sent.
  const known: Record<string, unknown> = {};
  const vendorFields: [string, unknown][] = [];
  for (const [name, value] of Object.entries(body)) {
    if (value === null) {
      continue;
    }
    // Only the schema's own names are assigned; any other (`__proto__` too) is kept as an entry.
    if (KNOWN_FIELDS.has(name)) {
      known[name] = value;
    } else {
      vendorFields.push([name, value]);
    }
  }
  const result = parseChatFields(known);
  if (!result.success) {
    throw fromIssue(result.issue);
  }
  const value = result.data;
  if (value.messages.length > limits.maxMessages) {
    throw invalid('messages', `messages: at most ${limits.maxMessages} messages.`);
  }
  const maxTokens = readMaxTokens(value, limits);
  const generation = readGenerationOptions(value as GenerationFields);
  if ('param' in generation) {
    throw invalid(generation.param, generation.message);
  }
  // Fields fhirgate does not know go to the provider's check: passed on where its operator listed them, else refused.
  const options = vendorFields.length > 0 ? { ...generation, vendorFields: Object.fromEntries(vendorFields) } : generation;
  const messages = value.messages.map(toChatMessage);
  if (!messages.some((message) => message.role === 'user' || message.role === 'tool')) {
    throw invalid('messages', 'messages must contain a user message, or tool results.');
  }
  const tools = value.tools?.map(toChatTool);
  const toolChoice = readToolChoice(value.tool_choice, tools);
  const answersEarlierCalls = checkToolResults(messages, value.conversation_id);
  return {
    messages,
    answersEarlierCalls,
    stream: value.stream ?? false,
    model: value.model,
    conversationId: value.conversation_id,
    patientId: value.patient_id,
    patientContext: value.patient_context,
    maxTokens,
    temperature: value.temperature,
    includeUsage: value.stream_options?.include_usage ?? false,
    tools,
    toolChoice,
    options,
    body: body as Record<string, unknown>,
  };
}

/** A zod issue as the 400 that names its field; an unknown field is named as such. */
function fromIssue(issue: z.core.$ZodIssue): AppError {
  const path = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    const param = [...path, issue.keys[0]].join('.');
    return invalid(param, `${param}: is not a field fhirgate knows; see the request fields in docs/api.md.`);
  }
  const param = path.join('.');
  return invalid(param, `${param ? `${param}: ` : ''}${issue.message}`);
}

/**
 * `max_completion_tokens` is OpenAI's newer name for `max_tokens`: either bounds the reply, within the server's
 * `maxTokens`; a request that gives both must give the same number, since no answer could honour two bounds.
 */
function readMaxTokens(value: { max_tokens?: number; max_completion_tokens?: number }, limits: ChatRequestLimits): number | undefined {
  const { max_tokens: maxTokens, max_completion_tokens: maxCompletionTokens } = value;
  if (maxTokens !== undefined && maxCompletionTokens !== undefined && maxTokens !== maxCompletionTokens) {
    throw invalid('max_completion_tokens', 'max_completion_tokens: differs from max_tokens; give one of them, or the same number in both.');
  }
  const [param, bound] = maxCompletionTokens === undefined ? ['max_tokens', maxTokens] : ['max_completion_tokens', maxCompletionTokens];
  if (bound !== undefined && bound > limits.maxTokens) {
    throw invalid(param, `${param}: at most ${limits.maxTokens}.`);
  }
  return bound;
}

function toChatMessage(message: z.output<typeof messageSchema>): ChatMessage {
  switch (message.role) {
    case 'tool':
      return { role: 'tool', content: message.content.text, toolCallId: message.tool_call_id };
    case 'assistant': {
      // A refusal the model gave earlier is what it said: the text it is shown again.
      const content = message.content?.text || (message.refusal ?? '');
      const toolCalls = message.tool_calls?.map((call): ChatToolCall => ({ id: call.id, name: call.function.name, arguments: call.function.arguments }));
      return { role: 'assistant', content, ...(toolCalls ? { toolCalls } : {}), ...(message.name ? { name: message.name } : {}) };
    }
    case 'function':
      throw invalid('messages', 'function messages are not supported.');
    default:
      return {
        role: message.role,
        content: message.content.text,
        ...(message.content.parts ? { parts: message.content.parts } : {}),
        ...(message.name ? { name: message.name } : {}),
      };
  }
}

function toChatTool(tool: z.output<typeof toolSchema>): ChatTool {
  const { name, description, parameters, strict } = tool.function;
  return {
    name,
    ...(description === undefined ? {} : { description }),
    parameters: parameters ?? { type: 'object', properties: {} },
    ...(typeof strict === 'boolean' ? { strict } : {}),
  };
}

/** The tool choice of a request with `tools`: a 400 when there are none, or when it names a function that is not one of them. */
export function readToolChoice(choice: z.output<typeof toolChoiceSchema> | undefined, tools: readonly ChatTool[] | undefined): ChatToolChoice | undefined {
  if (choice === undefined) {
    return undefined;
  }
  if (!tools?.length) {
    throw invalid('tool_choice', 'tool_choice: only allowed when tools are given.');
  }
  if (typeof choice === 'string') {
    return choice;
  }
  if (!tools.some((tool) => tool.name === choice.function.name)) {
    throw invalid('tool_choice', `tool_choice: names '${choice.function.name.slice(0, 64)}', which is not one of the tools.`);
  }
  return { name: choice.function.name };
}

/**
 * Every tool result must answer a call: one of an earlier assistant message of this request, or, for the results
 * that open a continued conversation's request, a call of the conversation's last reply (checked against the
 * conversation before anything is stored). Returns the ids of the latter. `paramOf` names the field of a message's
 * call id as the client sent it.
 */
export function checkToolResults(
  messages: readonly ChatMessage[],
  conversationId: string | undefined,
  paramOf: (index: number) => string = (index) => `messages.${index}.tool_call_id`
): string[] {
  const answersEarlier: string[] = [];
  const calls = new Set<string>();
  const answered = new Set<string>();
  let leading = true;
  for (const [index, message] of messages.entries()) {
    if (message.role === 'assistant') {
      message.toolCalls?.forEach((call) => calls.add(call.id));
    }
    if (message.role !== 'tool') {
      leading &&= message.role === 'system' || message.role === 'developer';
      continue;
    }
    const param = paramOf(index);
    if (answered.has(message.toolCallId)) {
      throw invalid(param, `${param}: the call '${message.toolCallId.slice(0, 64)}' is answered twice.`);
    }
    answered.add(message.toolCallId);
    if (calls.has(message.toolCallId)) {
      continue;
    }
    if (!leading || conversationId === undefined) {
      throw invalid(param, `${param}: answers no tool call of an earlier assistant message${conversationId === undefined ? '' : ' or of the conversation'}.`);
    }
    answersEarlier.push(message.toolCallId);
  }
  return answersEarlier;
}

function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', `Invalid request: ${message}`, { details: { param } });
}
