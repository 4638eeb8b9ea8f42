/**
 * The ChatModel over the `ollama` SDK (Ollama's native /api/chat). Sampling settings travel in `options`:
 * `maxTokens` as `num_predict`, and `temperature`, `top_p`, `top_k`, `seed`, `stop` and the penalties under their
 * own names; `response_format` becomes `format` (`json`, or the JSON schema), `reasoning_effort` `think`, and
 * `logprobs` / `top_logprobs` go as they are. Developer messages are system messages; text parts are consecutive
 * messages of the same role, as Ollama's own OpenAI-compatible endpoint reads them. What Ollama has no equivalent
 * for (`logit_bias`, `parallel_tool_calls: false`, strict tools, participant names, OpenAI's own fields) is refused
 * by `checkRequest`; `user` and `safety_identifier` have no Ollama field and are kept on fhirgate's record only.
 * Signals, timeouts and stream checks go through `ollama-transport.ts`, because the SDK has no per-request options.
 *
 * Tools: Ollama has no tool choice. `none` sends no tools (the history's calls and results still go); `required`
 * and a named tool send the tools and leave the choice to the model, as `auto`. Ollama's calls have no ids: the
 * adapter makes one per call (`call_` and random hex), and a tool result names its call's function (`tool_name`),
 * found by the result's `toolCallId` among the earlier assistant calls. Arguments are objects on Ollama's wire
 * (`tool-arguments.ts` for text that is not one).
 */
import { randomBytes } from 'node:crypto';
import { Ollama } from 'ollama';
import type { ChatRequest, ChatResponse, Message, Options, Tool, ToolCall } from 'ollama';
import type { ChatCompletion, ChatFinishReason, ChatMessage, ChatModel, ChatModelRequest, ChatRequestShape, ChatStreamEvent, ChatToolCall, ChatUsage } from './chat-model.ts';
import { toArgumentsObject } from './tool-arguments.ts';
import {
  createOllamaFetch,
  OLLAMA_MALFORMED_LINE,
  OLLAMA_STREAM_ERROR,
  runInOllamaScope,
} from './ollama-transport.ts';
import type { OllamaRequestScope } from './ollama-transport.ts';
import { createUpstreamError, readRetryAfterSeconds } from './provider-errors.ts';
import type { UpstreamFailure } from './provider-errors.ts';
import { refuseField, refuseJsonObjectSchema, refuseOpenAiOnly, refuseOptions, refuseParticipantNames, refuseVendorFields, toTokenLogprobs } from './request-support.ts';
import { connectionPool, fetchThrough } from './http-dispatcher.ts';
import { startUpstreamCall } from './upstream-call.ts';
import { upstreamEvents } from './upstream-events.ts';

/** How to reach an Ollama server. */
export interface OllamaChatModelOptions {
  /** The provider's configured name (the `provider` of `provider/model`). */
  readonly provider: string;
  /** Defaults to http://127.0.0.1:11434. */
  readonly baseUrl?: string;
  /** Sent as `Authorization: Bearer` (Ollama's cloud, or a proxy in front of a server); none by default. */
  readonly apiKey?: string;
  readonly timeoutMs: number;
  /** See `upstream-call.ts`. */
  readonly firstTokenTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
  readonly totalTimeoutMs?: number;
}

/** Creates the model, and its SDK client once. */
export function createOllamaChatModel(options: OllamaChatModelOptions): ChatModel {
  const { provider, timeoutMs } = options;
  const timeouts = { timeoutMs, firstTokenTimeoutMs: options.firstTokenTimeoutMs, totalTimeoutMs: options.totalTimeoutMs, connectTimeoutMs: options.connectTimeoutMs };
  const client = new Ollama({
    host: options.baseUrl ?? 'http://127.0.0.1:11434',
    fetch: createOllamaFetch(options.connectTimeoutMs ? fetchThrough(connectionPool(options.connectTimeoutMs)) : fetch),
    headers: options.apiKey === undefined ? undefined : { Authorization: `Bearer ${options.apiKey}` },
  });

  return {
    provider,

    checkRequest: (request) => checkOllamaRequest(provider, request),

    async complete(request: ChatModelRequest): Promise<ChatCompletion> {
      const call = startUpstreamCall(provider, request.signal, timeouts);
      const scope: OllamaRequestScope = { signal: call.signal, stream: false, headers: request.traceHeaders };
      // Once the SDK returns the answer it has read the body to its end: nothing of the call is left to release.
      let answered = false;
      try {
        const response = await runInOllamaScope(scope, () => client.chat({ ...buildRequest(request), stream: false }));
        answered = true;
        const toolCalls = readToolCalls(response.message?.tool_calls);
        return {
          text: response.message?.content ?? '',
          ...(toolCalls.length > 0 ? { toolCalls } : {}),
          finishReason: readFinishReason(response.done_reason, toolCalls.length > 0),
          usage: readUsage(response),
          ...(response.logprobs ? { logprobs: toTokenLogprobs(response.logprobs) } : {}),
        };
      } catch (error) {
        throw call.toError(error, (sdkError) => describeOllamaError(sdkError, scope));
      } finally {
        call.finish(answered);
      }
    },

    stream(request: ChatModelRequest): AsyncIterableIterator<ChatStreamEvent> {
      let scope: OllamaRequestScope | undefined;
      let calls = 0;
      let finish: ChatStreamEvent | undefined;
      return upstreamEvents<ChatResponse>({
        start: () => startUpstreamCall(provider, request.signal, timeouts, true),
        open: (call) => {
          scope = { signal: call.signal, stream: true, headers: request.traceHeaders };
          return runInOllamaScope(scope, () => client.chat({ ...buildRequest(request), stream: true }));
        },
        map: (part, emit) => {
          const text = part.message?.content;
          if (text) {
            emit(part.logprobs ? { type: 'text', text, logprobs: toTokenLogprobs(part.logprobs) } : { type: 'text', text });
          }
          // Ollama streams calls whole: one event per call, numbered across the reply's lines.
          for (const toolCall of readToolCalls(part.message?.tool_calls)) {
            emit({ type: 'tool_call', index: calls++, id: toolCall.id, name: toolCall.name, arguments: toolCall.arguments });
          }
          if (part.done) {
            // The SDK stops at the first `done` line; this one carries the finish reason and the counts.
            finish = { type: 'finish', finishReason: readFinishReason(part.done_reason, calls > 0), usage: readUsage(part) };
            return true;
          }
          return false;
        },
        end: () => {
          if (finish === undefined) {
            throw createUpstreamError(provider, { kind: 'stream_incomplete' });
          }
          return finish;
        },
        describe: (sdkError) => (scope ? describeOllamaError(sdkError, scope) : undefined),
      });
    },
  };
}

/** Ollama's `think` levels; `none` turns thinking off. */
const THINK_LEVELS: Readonly<Record<string, ChatRequest['think']>> = { none: false, low: 'low', medium: 'medium', high: 'high' };

function checkOllamaRequest(provider: string, request: ChatRequestShape): void {
  const label = { provider, kind: 'Ollama' };
  refuseVendorFields(label, request);
  refuseOptions(label, request, ['logitBias']);
  refuseOpenAiOnly(label, request);
  refuseParticipantNames(label, request);
  refuseJsonObjectSchema(label, request, "Ollama's format takes the schema as response_format json_schema");
  const { parallelToolCalls, reasoningEffort } = request.options ?? {};
  if (parallelToolCalls === false) {
    throw refuseField(label, 'parallel_tool_calls', 'false is not supported');
  }
  if (reasoningEffort !== undefined && THINK_LEVELS[reasoningEffort] === undefined) {
    throw refuseField(label, 'reasoning_effort', `'${reasoningEffort}' is not supported (Ollama's think levels: none, low, medium, high)`);
  }
  const strict = request.tools?.findIndex((tool) => tool.strict === true) ?? -1;
  if (strict >= 0) {
    throw refuseField(label, `tools.${strict}.function.strict`, 'is not supported');
  }
}

function buildRequest(request: ChatModelRequest): ChatRequest {
  const sampling = request.options ?? {};
  const options: Partial<Options> = {
    num_predict: request.maxTokens,
    temperature: request.temperature,
    top_p: sampling.topP,
    top_k: sampling.topK,
    seed: sampling.seed,
    stop: sampling.stop ? [...sampling.stop] : undefined,
    presence_penalty: sampling.presencePenalty,
    frequency_penalty: sampling.frequencyPenalty,
  };
  const tools = request.toolChoice === 'none' ? [] : (request.tools ?? []);
  const format = sampling.responseFormat;
  return {
    model: request.model,
    messages: toOllamaMessages(request.messages),
    tools:
      tools.length === 0
        ? undefined
        : tools.map(
            (tool): Tool => ({
              type: 'function',
              // The SDK types `parameters` as a narrow JSON Schema; Ollama takes any schema object and sends it on.
              function: { name: tool.name, description: tool.description, parameters: { ...tool.parameters } as Tool['function']['parameters'] },
            }),
          ),
    options,
    // Ollama's `format` takes a JSON schema, or `json` for any JSON.
    format: format === undefined ? undefined : format.type === 'json_schema' && format.schema ? { ...format.schema } : 'json',
    think: sampling.reasoningEffort === undefined ? undefined : THINK_LEVELS[sampling.reasoningEffort],
    logprobs: sampling.logprobs ? true : undefined,
    top_logprobs: sampling.logprobs?.top || undefined,
  };
}

function toOllamaMessages(messages: readonly ChatMessage[]): Message[] {
  // Ollama links a result to its call by the function's name only.
  const namesById = new Map<string, string>();
  return messages.flatMap((message): Message[] => {
    switch (message.role) {
      case 'assistant': {
        const calls = message.toolCalls ?? [];
        if (calls.length === 0) {
          return [{ role: 'assistant', content: message.content }];
        }
        for (const call of calls) {
          namesById.set(call.id, call.name);
        }
        return [
          {
            role: 'assistant',
            content: message.content,
            tool_calls: calls.map((call): ToolCall => ({ function: { name: call.name, arguments: toArgumentsObject(call.arguments) } })),
          },
        ];
      }
      case 'tool': {
        const name = namesById.get(message.toolCallId);
        return [name === undefined ? { role: 'tool', content: message.content } : { role: 'tool', content: message.content, tool_name: name }];
      }
      default: {
        const role = message.role === 'developer' ? 'system' : message.role;
        return (message.parts?.length ? message.parts : [message.content]).map((content) => ({ role, content }));
      }
    }
  });
}

function readToolCalls(calls: readonly ToolCall[] | undefined): ChatToolCall[] {
  return (calls ?? []).map((call) => ({
    id: `call_${randomBytes(12).toString('hex')}`,
    name: call.function.name,
    arguments: JSON.stringify(call.function.arguments ?? {}),
  }));
}

// Ollama says `stop` when the model made calls; only the calls tell.
function readFinishReason(reason: string | undefined, madeCalls: boolean): ChatFinishReason {
  if (reason === 'length') {
    return 'length';
  }
  return madeCalls ? 'tool_calls' : 'stop';
}

// Ollama leaves prompt_eval_count out when the whole prompt came from its cache; that counts as 0 prompt tokens.
function readUsage(response: Partial<Pick<ChatResponse, 'prompt_eval_count' | 'eval_count'>>): ChatUsage | undefined {
  const promptTokens = response.prompt_eval_count;
  const completionTokens = response.eval_count;
  if (typeof promptTokens !== 'number' && typeof completionTokens !== 'number') {
    return undefined;
  }
  return {
    promptTokens: typeof promptTokens === 'number' ? promptTokens : 0,
    completionTokens: typeof completionTokens === 'number' ? completionTokens : 0,
  };
}

function describeOllamaError(error: unknown, scope: OllamaRequestScope): UpstreamFailure | undefined {
  if (typeof error !== 'object' || error === null || !('message' in error)) {
    return undefined;
  }
  // The SDK's ResponseError (not exported) carries the HTTP status; the headers come from the transport.
  if ('status_code' in error && typeof error.status_code === 'number') {
    return {
      kind: 'http',
      status: error.status_code,
      retryAfterSeconds: readRetryAfterSeconds(scope.response?.headers),
    };
  }
  switch (error.message) {
    case OLLAMA_MALFORMED_LINE:
      return { kind: 'malformed_response' };
    case OLLAMA_STREAM_ERROR:
      return { kind: 'stream_error' };
    case 'Did not receive done or success response in stream.':
      return { kind: 'stream_incomplete' };
    case 'Missing body':
      return { kind: 'malformed_response' };
    default:
      return undefined;
  }
}
