import type { OutputOptions } from './output-options.ts';

// The port each provider's wire format implements. The delivery code (latency, pacing, cuts, back-pressure)
// only asks a format for strings to write, so no provider-specific branch lives in the streaming loop.

/** Which wire format a request arrived in. */
export type ProviderName = 'openai' | 'azure' | 'anthropic' | 'ollama';

/** A function call an assistant message carries, the same in every format. */
export interface NormalizedToolCall {
  /** The call's id; absent in Ollama's format, which has none. */
  id?: string;
  name: string;
  /** The arguments as JSON text: as sent (OpenAI), or the sent object serialized (Anthropic's `input`, Ollama). */
  arguments: string;
}

/**
 * A chat message reduced to what a test usually asserts on: the role and the text, and the tool information.
 * An Anthropic `tool_result` block becomes a message of its own with role `tool`, before the user's text.
 */
export interface NormalizedMessage {
  role: string;
  /** Text content; multi-part content has its text parts joined with a newline, other parts dropped. */
  content: string;
  /** The calls of an assistant message (present only when it has some). */
  toolCalls?: NormalizedToolCall[];
  /** The call a `tool` message answers (OpenAI's `tool_call_id`, Anthropic's `tool_use_id`). */
  toolCallId?: string;
  /** Ollama's `tool_name` of a `tool` message, its only link to the call (Ollama has no ids). */
  toolName?: string;
}

/** A function the request offers the model, the same in every format. */
export interface NormalizedTool {
  name: string;
  description?: string;
  /** The JSON Schema of the arguments: OpenAI's and Ollama's `parameters`, Anthropic's `input_schema` (`{}` when absent). */
  parameters: Record<string, unknown>;
  /** OpenAI's `function.strict` and Anthropic's `strict`, when sent. */
  strict?: boolean;
}

/** The request's tool choice in one vocabulary: Anthropic's `any` is `required`, `{type: 'tool', name}` is `{name}`. */
export type NormalizedToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** What the emulator needs from a chat request body, read by the provider's format. */
export interface ChatRequest {
  model: string;
  messages: NormalizedMessage[];
  stream: boolean;
  /** The request's cap on generated tokens, if any; a longer reply is cut and finishes as 'length'. */
  maxTokens: number | undefined;
  /** OpenAI's `stream_options.include_usage`: a final usage chunk with `choices: []`. */
  includeUsage: boolean;
  /** The tools offered (empty when none). */
  tools: NormalizedTool[];
  /** The tool choice, when the request sent one. */
  toolChoice?: NormalizedToolChoice;
  /** Structured output, log probabilities, reasoning effort and choices asked for. */
  output: OutputOptions;
}

/** A token's log probability as the emulated model reports it, with its likeliest alternatives. */
export interface TokenLogprob {
  token: string;
  logprob: number;
  top: { token: string; logprob: number }[];
}

/** A call the emulated model makes, before it is rendered in any format. */
export interface PlannedToolCall {
  /** 0-based position among the reply's calls. */
  index: number;
  /** An id the behaviour gave; otherwise each format makes one from the sequence and the index. */
  id?: string;
  name: string;
  input: Record<string, unknown>;
  /** `input` as JSON text. */
  arguments: string;
}

/** The reply decided for one request, before it is rendered in any format. */
export interface PlannedReply {
  /** Per-emulator sequence number, used in response ids so they are unique and predictable. */
  sequence: number;
  model: string;
  tokens: readonly string[];
  text: string;
  /** The calls of a tool-call step (empty otherwise), made after the text. */
  toolCalls: readonly PlannedToolCall[];
  /** 'length' when the request's token cap cut the reply; 'tool_calls' when the reply makes calls. */
  finishReason: 'stop' | 'length' | 'tool_calls';
  promptTokens: number;
  completionTokens: number;
  /** Unix seconds, as providers report creation times. */
  createdAt: number;
  /** One per token, when the request asked for log probabilities. */
  logprobs?: readonly TokenLogprob[];
  /** How many choices the reply has (OpenAI's `n`), each the same reply. */
  choices: number;
}

/** The strings one streamed reply is made of, prepared once so the per-token work is a concatenation. */
export interface StreamFrames {
  opening: string;
  /** The frame of the reply's token number `index`. */
  renderToken(text: string, index: number): string;
  /**
   * The frames of the reply's tool calls, written after the text tokens; each is one unit of the stream, as a token
   * is (a cut or an in-band error after N tokens counts them too).
   */
  toolCallFrames: readonly string[];
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
