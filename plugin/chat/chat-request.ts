/**
 * The chat completion request of the spec, validated. Known fields are checked strictly; other OpenAI fields
 * (`top_p`, `stop`, `seed`, `user`, `parallel_tool_calls`, ...) are kept and passed to the provider where it
 * supports them. Beyond the spec's `system` and `user` messages, a request may carry OpenAI's function calling:
 * `tools`, `tool_choice`, assistant messages with `tool_calls` and `tool` messages with their results.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';
import type { ChatMessage, ChatTool, ChatToolCall, ChatToolChoice } from '../llm/chat-model.ts';
import { PATIENT_CONTEXT_MODES, type PatientContextMode } from './patient-context.ts';

const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;
/** OpenAI's rule for function names, which every provider accepts. */
const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** OpenAI's own limit on the tools of one request. */
const MAX_TOOLS = 128;

/** Text, or OpenAI's text parts (joined); other part types are not accepted. */
const textContent = z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() })).transform((parts) => parts.map((part) => part.text).join(''))]);

/** A call's id: FHIR keeps it in a string, which is never blank. */
const callId = z.string().max(256).regex(/\S/, 'must not be empty');

const toolCallSchema = z.object({
  id: callId,
  type: z.literal('function').optional(),
  function: z.object({ name: z.string().regex(TOOL_NAME_PATTERN, 'is not a valid function name'), arguments: z.string() }),
});

const messageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.enum(['system', 'user']), content: textContent }),
  z.object({ role: z.literal('assistant'), content: textContent.nullish(), tool_calls: z.array(toolCallSchema).min(1).optional() }),
  z.object({ role: z.literal('tool'), content: textContent, tool_call_id: callId }),
]);

const toolSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().regex(TOOL_NAME_PATTERN, 'must be 1 to 64 letters, digits, _ or -'),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});

const toolChoiceSchema = z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) })]);

const chatRequestSchema = z
  .object({
    messages: z.array(messageSchema).min(1, 'messages must not be empty'),
    stream: z.boolean().optional(),
    model: z.string().min(1).optional(),
    conversation_id: z.string().regex(ID_PATTERN, 'conversation_id is not a valid id').optional(),
    patient_id: z.string().regex(ID_PATTERN, 'patient_id is not a valid id').optional(),
    patient_context: z.enum(PATIENT_CONTEXT_MODES).optional(),
    max_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(2).optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
    tools: z.array(toolSchema).max(MAX_TOOLS, `at most ${MAX_TOOLS} tools`).optional(),
    tool_choice: toolChoiceSchema.optional(),
  })
  .catchall(z.unknown());

/** A validated chat completion request. */
export interface ChatRequest {
  /** The request's messages, as the provider port takes them. */
  readonly messages: readonly ChatMessage[];
  /**
   * What the turn adds to the conversation, recorded as its prompt: the tool results after the request's last
   * assistant message, then its last user message if that comes after it too (just the last user message for a
   * request with neither).
   */
  readonly inputs: readonly TurnInput[];
  /** Tool results whose calls are not in this request: they answer the calls of the conversation's last reply. */
  readonly answersEarlierCalls: readonly string[];
  readonly stream: boolean;
  readonly model?: string;
  readonly conversationId?: string;
  readonly patientId?: string;
  /** How the chart is shared when the turn is about a patient; undefined: the project's default. */
  readonly patientContext?: PatientContextMode;
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly includeUsage: boolean;
  /** The client's own functions, passed to the model; calls to them come back to the client. */
  readonly tools?: readonly ChatTool[];
  readonly toolChoice?: ChatToolChoice;
  /** Other OpenAI fields, passed on to the provider. */
  readonly extra: Readonly<Record<string, unknown>>;
  /** The body as the client sent it: recorded on the prompt, so an auditor sees exactly what was asked. */
  readonly body: Readonly<Record<string, unknown>>;
}

/** A message the turn adds to the conversation: the user's text, or the result of a tool call. */
export type TurnInput = { readonly kind: 'user'; readonly text: string } | { readonly kind: 'tool-result'; readonly toolCallId: string; readonly text: string };

const KNOWN_FIELDS = new Set([
  'messages',
  'stream',
  'model',
  'conversation_id',
  'patient_id',
  'patient_context',
  'max_tokens',
  'temperature',
  'stream_options',
  'tools',
  'tool_choice',
]);

/** Bounds on one request, so a single caller cannot make fhirgate or the provider do unbounded work. */
export interface ChatRequestLimits {
  /** Most messages in a request. */
  readonly maxMessages: number;
  /** Largest `max_tokens` a request may ask for. */
  readonly maxTokens: number;
}

/** Validates a request body; a bad one is a 400 naming the field. */
export function parseChatRequest(body: unknown, limits: ChatRequestLimits = { maxMessages: 1000, maxTokens: 32_768 }): ChatRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('invalid_request', 'The request body must be a JSON object.');
  }
  const result = chatRequestSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0];
    const param = issue.path.map(String).join('.');
    throw invalid(param, `${param ? `${param}: ` : ''}${issue.message}`);
  }
  const value = result.data;
  if (value.messages.length > limits.maxMessages) {
    throw invalid('messages', `messages: at most ${limits.maxMessages} messages.`);
  }
  if (value.max_tokens !== undefined && value.max_tokens > limits.maxTokens) {
    throw invalid('max_tokens', `max_tokens: at most ${limits.maxTokens}.`);
  }
  const messages = value.messages.map(toChatMessage);
  if (!messages.some((message) => message.role === 'user' || message.role === 'tool')) {
    throw invalid('messages', 'messages must contain a user message, or tool results.');
  }
  const tools = value.tools?.map((tool): ChatTool => ({ name: tool.function.name, description: tool.function.description, parameters: tool.function.parameters ?? { type: 'object', properties: {} } }));
  const toolChoice = readToolChoice(value.tool_choice, tools);
  const answersEarlierCalls = checkToolResults(messages, value.conversation_id);
  const extra = Object.fromEntries(Object.entries(value).filter(([key]) => !KNOWN_FIELDS.has(key)));
  return {
    messages,
    inputs: turnInputsOf(messages),
    answersEarlierCalls,
    stream: value.stream ?? false,
    model: value.model,
    conversationId: value.conversation_id,
    patientId: value.patient_id,
    patientContext: value.patient_context,
    maxTokens: value.max_tokens,
    temperature: value.temperature,
    includeUsage: value.stream_options?.include_usage ?? false,
    tools,
    toolChoice,
    extra,
    body: body as Record<string, unknown>,
  };
}

function toChatMessage(message: z.output<typeof messageSchema>): ChatMessage {
  if (message.role === 'tool') {
    return { role: 'tool', content: message.content, toolCallId: message.tool_call_id };
  }
  if (message.role === 'assistant') {
    const toolCalls = message.tool_calls?.map((call): ChatToolCall => ({ id: call.id, name: call.function.name, arguments: call.function.arguments }));
    return toolCalls ? { role: 'assistant', content: message.content ?? '', toolCalls } : { role: 'assistant', content: message.content ?? '' };
  }
  return { role: message.role, content: message.content };
}

function readToolChoice(choice: z.output<typeof toolChoiceSchema> | undefined, tools: readonly ChatTool[] | undefined): ChatToolChoice | undefined {
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
 * conversation before anything is stored). Returns the ids of the latter.
 */
function checkToolResults(messages: readonly ChatMessage[], conversationId: string | undefined): string[] {
  const answersEarlier: string[] = [];
  const calls = new Set<string>();
  const answered = new Set<string>();
  let leading = true;
  for (const [index, message] of messages.entries()) {
    if (message.role === 'assistant') {
      message.toolCalls?.forEach((call) => calls.add(call.id));
    }
    if (message.role !== 'tool') {
      leading &&= message.role === 'system';
      continue;
    }
    if (answered.has(message.toolCallId)) {
      throw invalid(`messages.${index}.tool_call_id`, `messages.${index}.tool_call_id: the call '${message.toolCallId.slice(0, 64)}' is answered twice.`);
    }
    answered.add(message.toolCallId);
    if (calls.has(message.toolCallId)) {
      continue;
    }
    if (!leading || conversationId === undefined) {
      throw invalid(`messages.${index}.tool_call_id`, `messages.${index}.tool_call_id: answers no tool call of an earlier assistant message${conversationId === undefined ? '' : ' or of the conversation'}.`);
    }
    answersEarlier.push(message.toolCallId);
  }
  return answersEarlier;
}

function turnInputsOf(messages: readonly ChatMessage[]): TurnInput[] {
  const lastAssistant = messages.findLastIndex((message) => message.role === 'assistant');
  const inputs: TurnInput[] = [];
  for (const message of messages.slice(lastAssistant + 1)) {
    if (message.role === 'tool') {
      inputs.push({ kind: 'tool-result', toolCallId: message.toolCallId, text: message.content });
    }
  }
  const lastUser = messages.findLastIndex((message) => message.role === 'user');
  if (lastUser > lastAssistant || inputs.length === 0) {
    inputs.push({ kind: 'user', text: lastUser >= 0 ? messages[lastUser].content : '' });
  }
  return inputs;
}

function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', `Invalid request: ${message}`, { details: { param } });
}
