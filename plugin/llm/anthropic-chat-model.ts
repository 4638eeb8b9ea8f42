/**
 * The ChatModel over `@anthropic-ai/sdk` (Anthropic's Messages API). System and developer messages travel in the
 * top-level `system` field; OpenAI's `stop` becomes `stop_sequences`, `user` (or `safety_identifier`)
 * `metadata.user_id`, a `json_schema` response format and `reasoning_effort` Anthropic's `output_config` (`format`,
 * `effort`), `parallel_tool_calls: false` the tool choice's `disable_parallel_tool_use`. What Anthropic has no
 * equivalent for (`seed`, the penalties, `logit_bias`, `logprobs`, `json_object`, participant names, OpenAI's own
 * fields) is refused by `checkRequest`. Tools, calls and results take Anthropic's content-block shape
 * (`anthropic-messages.ts`).
 */
import { Anthropic, APIConnectionError, APIConnectionTimeoutError, APIError } from '@anthropic-ai/sdk';
import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages';
import type { ChatCompletion, ChatFinishReason, ChatModel, ChatModelRequest, ChatRequestShape, ChatStreamEvent, ChatUsage } from './chat-model.ts';
import { readToolUses, toAnthropicConversation, toAnthropicTools } from './anthropic-messages.ts';
import { createUpstreamError, readRetryAfterSeconds } from './provider-errors.ts';
import type { UpstreamFailure } from './provider-errors.ts';
import { refuseField, refuseJsonObjectSchema, refuseOpenAiOnly, refuseOptions, refuseParticipantNames, refuseVendorFields } from './request-support.ts';
import { connectionOptions } from './http-dispatcher.ts';
import { longestLimitMs, startUpstreamCall } from './upstream-call.ts';
import { upstreamEvents } from './upstream-events.ts';

/** How to reach Anthropic, or a proxy that speaks its Messages API. */
export interface AnthropicChatModelOptions {
  /** The provider's configured name (the `provider` of `provider/model`). */
  readonly provider: string;
  readonly apiKey: string;
  /** Defaults to https://api.anthropic.com. */
  readonly baseUrl?: string;
  readonly timeoutMs: number;
  /** See `upstream-call.ts`. */
  readonly firstTokenTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
  readonly totalTimeoutMs?: number;
}

/** Anthropic's input token counts; cached tokens are counted apart from `input_tokens`. */
interface InputUsage {
  readonly input_tokens?: number | null;
  readonly cache_creation_input_tokens?: number | null;
  readonly cache_read_input_tokens?: number | null;
}

/** Creates the model, and its SDK client once. */
export function createAnthropicChatModel(options: AnthropicChatModelOptions): ChatModel {
  const { provider, timeoutMs } = options;
  const timeouts = { timeoutMs, firstTokenTimeoutMs: options.firstTokenTimeoutMs, totalTimeoutMs: options.totalTimeoutMs, connectTimeoutMs: options.connectTimeoutMs };
  // Credentials, base URL and logging are given explicitly so the SDK reads nothing from the environment or from
  // credential files; its logger and OpenTelemetry spans stay off because both can carry request contents.
  const client = new Anthropic({
    apiKey: options.apiKey,
    baseURL: options.baseUrl ?? 'https://api.anthropic.com',
    webhookKey: null,
    maxRetries: 0,
    timeout: longestLimitMs(options),
    logLevel: 'off',
    openTelemetry: false,
    ...connectionOptions(options.connectTimeoutMs),
  });

  return {
    provider,

    checkRequest: (request) => checkAnthropicRequest(provider, request),

    async complete(request: ChatModelRequest): Promise<ChatCompletion> {
      const call = startUpstreamCall(provider, request.signal, timeouts);
      // Once the SDK returns the answer it has read the body to its end: nothing of the call is left to release.
      let answered = false;
      try {
        const message = await client.messages.create({ ...buildParameters(request), stream: false }, { signal: call.signal, headers: request.traceHeaders });
        answered = true;
        let text = '';
        for (const block of message.content) {
          if (block.type === 'text') {
            text += block.text;
          }
        }
        const toolCalls = readToolUses(message.content);
        return {
          text,
          ...(toolCalls.length > 0 ? { toolCalls } : {}),
          finishReason: readFinishReason(message.stop_reason),
          usage: { promptTokens: countInputTokens(message.usage), completionTokens: message.usage.output_tokens },
        };
      } catch (error) {
        throw call.toError(error, describeAnthropicError);
      } finally {
        call.finish(answered);
      }
    },

    stream(request: ChatModelRequest): AsyncIterableIterator<ChatStreamEvent> {
      let finishReason: ChatFinishReason | undefined;
      let promptTokens: number | undefined;
      let completionTokens: number | undefined;
      // The port numbers calls 0, 1, ... in the reply; Anthropic's block index counts text blocks too.
      const calls = new ToolUseBlocks();
      return upstreamEvents<RawMessageStreamEvent>({
        start: () => startUpstreamCall(provider, request.signal, timeouts, true),
        open: (call) => client.messages.create({ ...buildParameters(request), stream: true }, { signal: call.signal, headers: request.traceHeaders }),
        map: (event, emit) => {
          switch (event.type) {
            case 'message_start':
              promptTokens = countInputTokens(event.message.usage);
              completionTokens = event.message.usage.output_tokens;
              break;
            case 'content_block_start':
              if (event.content_block.type === 'tool_use') {
                emit(calls.start(event.index, event.content_block));
              }
              break;
            case 'content_block_delta':
              if (event.delta.type === 'text_delta' && event.delta.text !== '') {
                emit({ type: 'text', text: event.delta.text });
              } else if (event.delta.type === 'input_json_delta') {
                const fragment = calls.arguments(event.index, event.delta.partial_json);
                if (fragment) {
                  emit(fragment);
                }
              }
              break;
            case 'content_block_stop': {
              const fragment = calls.stop(event.index);
              if (fragment) {
                emit(fragment);
              }
              break;
            }
            case 'message_delta':
              // message_delta's counts are cumulative: they replace message_start's, never add to them.
              finishReason = readFinishReason(event.delta.stop_reason);
              completionTokens = event.usage.output_tokens;
              if (typeof event.usage.input_tokens === 'number') {
                promptTokens = countInputTokens(event.usage);
              }
              break;
            default:
              break;
          }
        },
        end: () => {
          if (finishReason === undefined) {
            throw createUpstreamError(provider, { kind: 'stream_incomplete' });
          }
          const usage: ChatUsage | undefined =
            promptTokens !== undefined && completionTokens !== undefined ? { promptTokens, completionTokens } : undefined;
          return { type: 'finish', finishReason, usage };
        },
        describe: describeAnthropicError,
      });
    },
  };
}

type ToolCallEvent = Extract<ChatStreamEvent, { type: 'tool_call' }>;

/** The `tool_use` blocks of a streamed reply, by Anthropic's block index, and the port's index of each. */
class ToolUseBlocks {
  readonly #calls = new Map<number, { readonly index: number; sentArguments: boolean }>();

  /** A `tool_use` block starts: the call's first fragment, with its id and name. */
  start(blockIndex: number, block: { readonly id: string; readonly name: string; readonly input: unknown }): ToolCallEvent {
    const index = this.#calls.size;
    // Anthropic starts a block with an empty input and streams it; one that came whole is taken as it is.
    const input = typeof block.input === 'object' && block.input !== null && Object.keys(block.input).length > 0 ? JSON.stringify(block.input) : '';
    this.#calls.set(blockIndex, { index, sentArguments: input !== '' });
    return { type: 'tool_call', index, id: block.id, name: block.name, arguments: input };
  }

  /** A piece of a call's input JSON. */
  arguments(blockIndex: number, text: string): ToolCallEvent | undefined {
    const call = this.#calls.get(blockIndex);
    if (call === undefined || text === '') {
      return undefined;
    }
    call.sentArguments = true;
    return { type: 'tool_call', index: call.index, arguments: text };
  }

  /** A block ends: a call without arguments gets `{}`, as a whole reply's call would (`JSON.stringify(input)`). */
  stop(blockIndex: number): ToolCallEvent | undefined {
    const call = this.#calls.get(blockIndex);
    if (call === undefined || call.sentArguments) {
      return undefined;
    }
    call.sentArguments = true;
    return { type: 'tool_call', index: call.index, arguments: '{}' };
  }
}

/** Anthropic's effort levels: OpenAI's `none` and `minimal` have no counterpart. */
const ANTHROPIC_EFFORTS = new Set(['low', 'medium', 'high', 'xhigh', 'max']);

function checkAnthropicRequest(provider: string, request: ChatRequestShape): void {
  const label = { provider, kind: 'Anthropic' };
  refuseVendorFields(label, request);
  refuseOptions(label, request, ['seed', 'presencePenalty', 'frequencyPenalty', 'logitBias', 'logprobs']);
  refuseOpenAiOnly(label, request);
  refuseParticipantNames(label, request);
  refuseJsonObjectSchema(label, request, "Anthropic's structured output takes the schema as response_format json_schema");
  const { responseFormat, reasoningEffort } = request.options ?? {};
  if (responseFormat?.type === 'json_object') {
    throw refuseField(label, 'response_format', "of type json_object is not supported (Anthropic's structured output takes a schema: use json_schema)");
  }
  if (responseFormat?.type === 'json_schema' && responseFormat.schema === undefined) {
    throw refuseField(label, 'response_format.json_schema.schema', 'is required');
  }
  if (reasoningEffort !== undefined && !ANTHROPIC_EFFORTS.has(reasoningEffort)) {
    throw refuseField(label, 'reasoning_effort', `'${reasoningEffort}' is not supported (Anthropic's efforts: low, medium, high, xhigh, max)`);
  }
}

function buildParameters(request: ChatModelRequest) {
  const options = request.options ?? {};
  const { system, messages } = toAnthropicConversation(request.messages);
  const endUser = options.endUser?.safetyIdentifier ?? options.endUser?.user;
  const format = options.responseFormat?.type === 'json_schema' && options.responseFormat.schema ? { type: 'json_schema' as const, schema: { ...options.responseFormat.schema } } : undefined;
  const effort = options.reasoningEffort && ANTHROPIC_EFFORTS.has(options.reasoningEffort) ? (options.reasoningEffort as 'low' | 'medium' | 'high' | 'xhigh' | 'max') : undefined;
  return {
    model: request.model,
    max_tokens: request.maxTokens,
    system,
    messages,
    ...toAnthropicTools(request),
    temperature: request.temperature,
    top_p: options.topP,
    top_k: options.topK,
    stop_sequences: options.stop ? [...options.stop] : undefined,
    metadata: endUser ? { user_id: endUser } : undefined,
    output_config: format || effort ? { ...(format ? { format } : {}), ...(effort ? { effort } : {}) } : undefined,
  };
}

function countInputTokens(usage: InputUsage): number {
  return (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0);
}

function readFinishReason(reason: string | null | undefined): ChatFinishReason {
  switch (reason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'refusal':
      return 'content_filter';
    case 'tool_use':
      return 'tool_calls';
    default:
      return 'stop';
  }
}

function describeAnthropicError(error: unknown): UpstreamFailure | undefined {
  if (error instanceof APIConnectionTimeoutError) {
    return { kind: 'timeout' };
  }
  if (error instanceof APIConnectionError) {
    return { kind: 'connection' };
  }
  if (!(error instanceof APIError)) {
    return undefined;
  }
  if (error.status === undefined) {
    // An `error` event inside the stream (e.g. overloaded_error): the SDK raises it without a status.
    return { kind: 'stream_error', type: error.type ?? undefined };
  }
  return {
    kind: 'http',
    status: error.status,
    retryAfterSeconds: readRetryAfterSeconds(error.headers),
    type: error.type ?? undefined,
    code: error.errorCode ?? undefined,
    requestId: error.requestID ?? undefined,
  };
}
