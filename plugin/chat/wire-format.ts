/**
 * The OpenAI wire format of fhirgate's answers, built in one place for a turn that runs and for one replayed from
 * its records (`Idempotency-Key`): the JSON completion and the SSE chunks, with fhirgate's `conversation_id` and
 * `communication_id`.
 */
import type { ChatFinishReason, ChatTokenLogprob, ChatToolCall, ChatUsage } from '../llm/chat-model.ts';

/** What every answer of a turn carries. */
export interface AnswerFields {
  /** `chatcmpl-<reply id>`. */
  readonly completionId: string;
  /** Unix seconds: when the prompt was sent. */
  readonly created: number;
  /** `provider/model` of the model that answered. */
  readonly modelId: string;
  readonly conversationId: string;
  readonly replyId: string;
  /**
   * The request asked for `stream_options.include_usage`: then, as OpenAI's do, every chunk carries `usage`, null
   * until the usage chunk.
   */
  readonly includeUsage?: boolean;
}

/**
 * The `chat.completion` body of a JSON answer; with calls, `content` is null when the model wrote no text, as OpenAI's
 * is. `refusal` and `logprobs` are null unless there is one, as OpenAI's contract requires them.
 */
export function completionBody(
  fields: AnswerFields,
  text: string,
  finishReason: ChatFinishReason,
  usage: ChatUsage | undefined,
  toolCalls: readonly ChatToolCall[] = [],
  logprobs?: readonly ChatTokenLogprob[]
): Record<string, unknown> {
  const message =
    toolCalls.length > 0
      ? {
          role: 'assistant',
          content: text || null,
          refusal: null,
          tool_calls: toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })),
        }
      : { role: 'assistant', content: text, refusal: null };
  return {
    id: fields.completionId,
    object: 'chat.completion',
    created: fields.created,
    model: fields.modelId,
    choices: [{ index: 0, message, finish_reason: finishReason, logprobs: logprobs ? toWireLogprobs(logprobs) : null }],
    usage: toWireUsage(usage),
    conversation_id: fields.conversationId,
    communication_id: fields.replyId,
  };
}

/** What a chunk carries besides its delta; absent: a chunk in the middle of the stream. */
export interface ChunkParts {
  readonly finishReason?: ChatFinishReason;
  /** The tokens of the chunk's text with their log probabilities (the request asked for `logprobs`). */
  readonly logprobs?: readonly ChatTokenLogprob[];
  /** fhirgate's own fields beside `conversation_id` (the last chunk's `communication_id`). */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/**
 * One `chat.completion.chunk` of a stream, field for field as OpenAI's: `logprobs` null on a choice whose tokens
 * carry none, `usage` null on every chunk of a stream that asked for it (its numbers come in the usage chunk).
 * OpenAI's own `service_tier`, `system_fingerprint` and `obfuscation` are not sent (docs/api.md says why).
 */
export function completionChunk(fields: AnswerFields, delta: Record<string, unknown>, parts: ChunkParts = {}): Record<string, unknown> {
  return {
    id: fields.completionId,
    object: 'chat.completion.chunk',
    created: fields.created,
    model: fields.modelId,
    conversation_id: fields.conversationId,
    ...parts.extra,
    choices: [{ index: 0, delta, logprobs: parts.logprobs ? toWireLogprobs(parts.logprobs) : null, finish_reason: parts.finishReason ?? null }],
    ...(fields.includeUsage ? { usage: null } : {}),
  };
}

/**
 * A composer of one stream's content chunks as JSON text: the bytes of `completionChunk(fields, { content: text })`
 * serialized, put together from the text and the rest of the chunk serialized once (again only if the answering
 * model changes, when a fallback answers). A stream sends one per token.
 */
export function contentChunkComposer(): (fields: AnswerFields, text: string) => string {
  let modelId: string | undefined;
  let before = '';
  let after = '';
  return (fields, text) => {
    if (fields.modelId !== modelId) {
      // The rest of the chunk is the same all through a stream: only a fallback's model changes it.
      modelId = fields.modelId;
      const whole = JSON.stringify(completionChunk(fields, { content: CONTENT_MARK }));
      const at = whole.indexOf(CONTENT_MARK_JSON);
      before = whole.slice(0, at);
      after = whole.slice(at + CONTENT_MARK_JSON.length);
    }
    return before + JSON.stringify(text) + after;
  };
}

/** Where the text goes in a serialized content chunk: a string no other field of the chunk can hold. */
const CONTENT_MARK = '\u0000content\u0000';
const CONTENT_MARK_JSON = JSON.stringify(CONTENT_MARK);

/** A content chunk whose tokens carry log probabilities (the request asked for `logprobs`). */
export function contentChunkWithLogprobs(fields: AnswerFields, text: string, logprobs: readonly ChatTokenLogprob[]): Record<string, unknown> {
  return completionChunk(fields, { content: text }, { logprobs });
}

/** Log probabilities as OpenAI's `choices[].logprobs`. */
export function toWireLogprobs(logprobs: readonly ChatTokenLogprob[]): { content: unknown[]; refusal: null } {
  const entry = (token: { readonly token: string; readonly logprob: number; readonly bytes: readonly number[] | null }): Record<string, unknown> => ({
    token: token.token,
    logprob: token.logprob,
    bytes: token.bytes,
  });
  return { content: logprobs.map((token) => ({ ...entry(token), top_logprobs: token.topLogprobs.map(entry) })), refusal: null };
}

/** A fragment of a tool call, as a stream's events carry it. */
export interface ToolCallFragment {
  readonly index: number;
  readonly id?: string;
  readonly name?: string;
  readonly arguments: string;
}

/** The `delta` of a fragment of a tool call: `id`, `type` and `name` on the call's first fragment, then more arguments. */
export function toolCallDelta(fragment: ToolCallFragment): Record<string, unknown> {
  const call =
    fragment.id === undefined
      ? { index: fragment.index, function: { arguments: fragment.arguments } }
      : { index: fragment.index, id: fragment.id, type: 'function', function: { name: fragment.name ?? '', arguments: fragment.arguments } };
  return { tool_calls: [call] };
}

/**
 * The `delta` of a stream's first chunk, as OpenAI's: the role with empty content; for a reply that opens with a
 * call, the role with `content: null` and the call's first fragment, in one chunk.
 */
export function openingDelta(firstCall?: ToolCallFragment): Record<string, unknown> {
  return firstCall ? { role: 'assistant', content: null, ...toolCallDelta(firstCall), refusal: null } : { role: 'assistant', content: '', refusal: null };
}

/** The last chunk, naming the reply's record. */
export function finishChunk(fields: AnswerFields, finishReason: ChatFinishReason): Record<string, unknown> {
  return completionChunk(fields, {}, { finishReason, extra: { communication_id: fields.replyId } });
}

/** The usage chunk sent when the request asked for `stream_options.include_usage`. */
export function usageChunk(fields: AnswerFields, usage: ChatUsage | undefined): Record<string, unknown> {
  return { ...completionChunk(fields, {}), choices: [], usage: toWireUsage(usage) };
}

/** Usage in the wire format; zeros when the provider reported none. */
export function toWireUsage(usage: ChatUsage | undefined): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const prompt = usage?.promptTokens ?? 0;
  const completion = usage?.completionTokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}
