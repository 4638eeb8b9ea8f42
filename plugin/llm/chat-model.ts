/**
 * The provider port: the one interface the chat pipeline calls, whatever LLM provider answers. Adapters over the
 * openai, @anthropic-ai/sdk and ollama SDKs implement it; nothing outside `plugin/llm/` branches on a provider.
 *
 * Failure contract of `complete` and `stream` (see `provider-errors.ts` for the full table):
 * - a provider failure rejects with an `AppError` (`upstream_error` 502 or `upstream_timeout` 504), also when it
 *   happens in the middle of a stream, after text events were delivered: a stream never ends silently;
 * - an aborted `signal` rejects with a `DOMException` named `AbortError` (test with `isAbortError`), never with an
 *   AppError: the caller went away, the provider did not fail.
 */

/** A message of the conversation as the provider sees it. */
export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

/** One call to a model. */
export interface ChatModelRequest {
  /** The model or deployment name: the part of `provider/model` after the provider. */
  readonly model: string;
  /** System messages first, then the conversation history, then the request's messages, in order. */
  readonly messages: readonly ChatMessage[];
  /** Upper bound on generated tokens. */
  readonly maxTokens: number;
  readonly temperature?: number;
  /**
   * Other OpenAI request fields the client sent (`top_p`, `stop`, `seed`, `user`, `presence_penalty`,
   * `frequency_penalty`, ...). Each adapter passes those its provider supports, maps those it names differently
   * (`stop` becomes Anthropic's `stop_sequences`, Ollama's `options.stop`) and drops the rest; values of the wrong
   * type are dropped too. See `sampling-options.ts`.
   */
  readonly extra: Readonly<Record<string, unknown>>;
  /** Aborting it cancels the upstream HTTP request. */
  readonly signal: AbortSignal;
}

/** Why the model stopped: `stop` (done, or a stop sequence), `length` (hit `maxTokens`), `content_filter`. */
export type ChatFinishReason = 'stop' | 'length' | 'content_filter';

/** Token counts as the provider reported them. */
export interface ChatUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** A whole reply. */
export interface ChatCompletion {
  readonly text: string;
  readonly finishReason: ChatFinishReason;
  /** Undefined when the provider reported no usage (some OpenAI-compatible servers do not). */
  readonly usage: ChatUsage | undefined;
}

/** An event of a streamed reply: text fragments, then exactly one `finish`. */
export type ChatStreamEvent =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'finish'; readonly finishReason: ChatFinishReason; readonly usage: ChatUsage | undefined };

/** A model of one configured provider. */
export interface ChatModel {
  /** The provider's configured name, e.g. `openai`, `azure`, `anthropic`, `ollama`, or an operator's own name. */
  readonly provider: string;
  /** Asks for a whole reply. */
  complete(request: ChatModelRequest): Promise<ChatCompletion>;
  /**
   * Streams a reply: `text` events, then exactly one `finish` event. The upstream request starts on the first
   * `next()`; breaking out of the loop cancels it. Failures are thrown from the iterator (see the file comment).
   */
  stream(request: ChatModelRequest): AsyncIterable<ChatStreamEvent>;
}
