// The port each provider's wire format implements. The delivery code (latency, pacing, cuts, back-pressure)
// only asks a format for strings to write, so no provider-specific branch lives in the streaming loop.

/** Which wire format a request arrived in. */
export type ProviderName = 'openai' | 'azure' | 'anthropic' | 'ollama';

/** A chat message reduced to what a test usually asserts on: the role and the text. */
export interface NormalizedMessage {
  role: string;
  /** Text content; multi-part content has its text parts joined with a newline, other parts dropped. */
  content: string;
}

/** What the emulator needs from a chat request body, read by the provider's format. */
export interface ChatRequest {
  model: string;
  messages: NormalizedMessage[];
  stream: boolean;
  /** The request's cap on generated tokens, if any; a longer reply is cut and finishes as 'length'. */
  maxTokens: number | undefined;
  /** OpenAI's `stream_options.include_usage`: a final usage chunk with `choices: []`. */
  includeUsage: boolean;
}

/** The reply decided for one request, before it is rendered in any format. */
export interface PlannedReply {
  /** Per-emulator sequence number, used in response ids so they are unique and predictable. */
  sequence: number;
  model: string;
  tokens: readonly string[];
  text: string;
  /** 'length' when the request's token cap cut the reply. */
  finishReason: 'stop' | 'length';
  promptTokens: number;
  completionTokens: number;
  /** Unix seconds, as providers report creation times. */
  createdAt: number;
}

/** The strings one streamed reply is made of, prepared once so the per-token work is a concatenation. */
export interface StreamFrames {
  opening: string;
  renderToken(text: string): string;
  /** Everything after the last token: finish reason, usage, terminator. */
  closing: string;
  /** A frame whose JSON does not parse. */
  malformed: string;
  /** An error reported inside the stream, in the provider's shape. */
  renderInBandError(message: string): string;
}

/** A provider's wire format: how its requests read and how its responses, streams and errors are written. */
export interface ProviderFormat {
  readonly streamContentType: string;
  /**
   * Reads a chat request body; returns a message (for a 400 in the provider's shape) when the body is unusable.
   * `pathModel` is a model named by the URL (Azure's deployment), which wins over the body's `model`.
   */
  readChatRequest(body: Record<string, unknown>, pathModel: string | undefined): ChatRequest | string;
  renderCompletion(request: ChatRequest, reply: PlannedReply): string;
  createStreamFrames(request: ChatRequest, reply: PlannedReply): StreamFrames;
  renderError(status: number, message: string): string;
  /** Headers the provider puts on every response (request ids the SDKs surface). */
  responseHeaders(sequence: number): Record<string, string>;
}

/** Joins the text parts of a message's content (a string, or a list of parts with `type: 'text'`). */
export function readTextContent(content: unknown): string {
  if (typeof content === 'string') {
    return content;
  }
  if (!Array.isArray(content)) {
    return '';
  }
  const texts: string[] = [];
  for (const part of content) {
    if (typeof part === 'object' && part !== null && 'text' in part && typeof part.text === 'string') {
      texts.push(part.text);
    }
  }
  return texts.join('\n');
}

/** Reads a list of `{role, content}` messages, or returns an error message naming what is wrong. */
export function readMessages(value: unknown): NormalizedMessage[] | string {
  if (!Array.isArray(value)) {
    return 'messages must be an array';
  }
  const messages: NormalizedMessage[] = [];
  for (const message of value) {
    if (typeof message !== 'object' || message === null || !('role' in message) || typeof message.role !== 'string') {
      return 'each message needs a string role';
    }
    messages.push({ role: message.role, content: 'content' in message ? readTextContent(message.content) : '' });
  }
  return messages;
}
