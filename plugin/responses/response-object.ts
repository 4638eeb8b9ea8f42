/**
 * The Responses API's wire format of fhirgate's answers, built in one place for a turn that runs, one replayed from
 * its records and one read back (`GET /v1/responses/{id}`): the ids, the output items and the Response object.
 *
 * Ids are the records': a response is `resp_<id of its reply Communication>`, its message item `msg_<reply id>`,
 * its function calls `fc_<reply id>_<index>` (FHIR ids hold no `_`, so each id reads back into its record).
 */
import type { ChatFinishReason, ChatTokenLogprob, ChatToolCall, ChatUsage } from '../llm/chat-model.ts';
import type { ReplyStatus } from '../chat/communication-builders.ts';
import { toWireLogprobs } from '../chat/wire-format.ts';

const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;

/** `resp_<reply id>`. */
export function responseIdOf(replyId: string): string {
  return `resp_${replyId}`;
}

/** The reply id a response id names, or undefined when it is not one of fhirgate's. */
export function replyIdOfResponse(responseId: string): string | undefined {
  const replyId = responseId.startsWith('resp_') ? responseId.slice('resp_'.length) : '';
  return FHIR_ID.test(replyId) ? replyId : undefined;
}

/** What an output item id names: the message of a reply, or one of its function calls. */
export type OutputItemRef = { readonly kind: 'message'; readonly replyId: string } | { readonly kind: 'function_call'; readonly replyId: string; readonly index: number };

/** The record an output item id names, or undefined when it is not one of fhirgate's. */
export function parseOutputItemId(id: string): OutputItemRef | undefined {
  if (id.startsWith('msg_')) {
    const replyId = id.slice('msg_'.length);
    return FHIR_ID.test(replyId) ? { kind: 'message', replyId } : undefined;
  }
  const call = /^fc_([A-Za-z0-9\-.]{1,64})_(\d{1,4})$/.exec(id);
  return call ? { kind: 'function_call', replyId: call[1], index: Number(call[2]) } : undefined;
}

/** The status of an output item, and of a response. */
export type ItemStatus = 'in_progress' | 'completed' | 'incomplete';
export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';

/** An `output_text` part; its `logprobs` (required by the contract) are empty unless the request asked for them. */
export function outputTextPart(text: string, logprobs?: readonly ChatTokenLogprob[]): Record<string, unknown> {
  return { type: 'output_text', text, annotations: [], logprobs: logprobs ? toWireLogprobs(logprobs).content : [] };
}

/** The assistant's message item. */
export function messageItem(replyId: string, status: ItemStatus, content: readonly Record<string, unknown>[]): Record<string, unknown> {
  return { id: `msg_${replyId}`, type: 'message', status, role: 'assistant', content };
}

/** A function call item: the `index`th call of the reply. */
export function functionCallItem(replyId: string, index: number, call: ChatToolCall, status: ItemStatus): Record<string, unknown> {
  return { id: `fc_${replyId}_${index}`, type: 'function_call', status, call_id: call.id, name: call.name, arguments: call.arguments };
}

/** A finished reply's output: its message when it has text, then its function calls. */
export function outputItems(replyId: string, text: string, toolCalls: readonly ChatToolCall[], status: ItemStatus, logprobs?: readonly ChatTokenLogprob[]): Record<string, unknown>[] {
  const message = text || logprobs ? [messageItem(replyId, status, [outputTextPart(text, logprobs)])] : [];
  return [...message, ...toolCalls.map((call, index) => functionCallItem(replyId, index, call, status))];
}

/** How a response ended, in the Responses API's words. */
export interface ResponseEnd {
  readonly status: ResponseStatus;
  readonly incompleteReason?: 'max_output_tokens' | 'content_filter';
  readonly error?: { readonly code: string; readonly message: string };
}

/**
 * A reply's record status and finish reason as the response's: a reply cut by `max_output_tokens` or a content
 * filter is `incomplete`; one the client or the server stopped is `cancelled`; one the provider failed is `failed`.
 */
export function responseEndOf(status: ReplyStatus, finishReason: ChatFinishReason | undefined, reason?: string): ResponseEnd {
  if (status === 'not-done') {
    return { status: 'failed', error: { code: 'server_error', message: reason ?? 'The provider did not answer.' } };
  }
  if (status === 'stopped') {
    return { status: 'cancelled' };
  }
  if (finishReason === 'length') {
    return { status: 'incomplete', incompleteReason: 'max_output_tokens' };
  }
  return finishReason === 'content_filter' ? { status: 'incomplete', incompleteReason: 'content_filter' } : { status: 'completed' };
}

/** What a Response object says about its turn. */
export interface ResponseFields {
  readonly replyId: string;
  readonly conversationId: string;
  /** Unix seconds: when the prompt was sent. */
  readonly created: number;
  /** Unix seconds: when the reply was recorded, for a completed one. */
  readonly completed?: number;
  /** `provider/model` of the model that answered. */
  readonly modelId: string;
  readonly end: ResponseEnd | { readonly status: 'in_progress' };
  readonly output: readonly Record<string, unknown>[];
  /** Absent while in progress; zeros when the provider reported none. */
  readonly usage?: ChatUsage | null;
  /** The request body as the client sent it: the request's settings are echoed from it. */
  readonly request: Readonly<Record<string, unknown>>;
}

/** The Response object. */
export function responseObject(fields: ResponseFields): Record<string, unknown> {
  const { end } = fields;
  return {
    id: responseIdOf(fields.replyId),
    object: 'response',
    created_at: fields.created,
    status: end.status,
    ...(fields.completed !== undefined && end.status === 'completed' ? { completed_at: fields.completed } : {}),
    background: false,
    error: 'error' in end && end.error ? end.error : null,
    incomplete_details: 'incompleteReason' in end && end.incompleteReason ? { reason: end.incompleteReason } : null,
    model: fields.modelId,
    output: fields.output,
    usage: fields.usage === undefined ? null : toResponseUsage(fields.usage),
    conversation: { id: fields.conversationId },
    // OpenAI's access programs are refused on requests (docs/api.md): a response never used one.
    access_programs: null,
    ...echoedSettings(fields.request),
  };
}

/**
 * Token counts in the Responses API's shape; zeros when the provider reported none. The providers' cache counts do
 * not reach fhirgate's usage (a turn is counted as its prompt and completion tokens), so both cache counts are 0.
 */
export function toResponseUsage(usage: ChatUsage | null | undefined): Record<string, unknown> {
  const input = usage?.promptTokens ?? 0;
  const output = usage?.completionTokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/**
 * The request's settings, echoed as OpenAI echoes them; a reply of a chat-completions request (no `input`) echoes
 * the defaults.
 */
function echoedSettings(body: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const responses = 'input' in body;
  const of = <T>(name: string, isType: (value: unknown) => value is T): T | null => (responses && isType(body[name]) ? body[name] : null);
  const reasoning = of('reasoning', isObject);
  const text = of('text', isObject);
  return {
    instructions: of('instructions', isString),
    max_output_tokens: of('max_output_tokens', isNumber),
    metadata: of('metadata', isObject) ?? {},
    parallel_tool_calls: of('parallel_tool_calls', isBoolean) ?? true,
    previous_response_id: of('previous_response_id', isString),
    reasoning: { effort: reasoning?.effort ?? null, summary: null },
    store: of('store', isBoolean) ?? true,
    temperature: of('temperature', isNumber),
    text: { format: text?.format ?? { type: 'text' }, ...(text?.verbosity ? { verbosity: text.verbosity } : {}) },
    tool_choice: body.tool_choice !== undefined && body.tool_choice !== null && responses ? body.tool_choice : 'auto',
    tools: (of('tools', Array.isArray) ?? []).map(echoedTool),
    top_p: of('top_p', isNumber),
    top_logprobs: of('top_logprobs', isNumber),
    truncation: of('truncation', isString) ?? 'disabled',
    ...(isString(body.user) && responses ? { user: body.user } : {}),
    safety_identifier: of('safety_identifier', isString),
    ...(isString(body.service_tier) && responses ? { service_tier: body.service_tier } : {}),
  };
}

/** A function tool as OpenAI echoes it: `parameters` and `strict` always there, null when not given. */
function echoedTool(tool: unknown): unknown {
  return isObject(tool) ? { ...tool, parameters: tool.parameters ?? null, strict: tool.strict ?? null } : tool;
}

function isString(value: unknown): value is string {
  return typeof value === 'string';
}

function isNumber(value: unknown): value is number {
  return typeof value === 'number';
}

function isBoolean(value: unknown): value is boolean {
  return typeof value === 'boolean';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
