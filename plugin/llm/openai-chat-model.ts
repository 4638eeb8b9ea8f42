/**
 * The ChatModel over the `openai` SDK, for three kinds of provider that speak OpenAI's chat completions: OpenAI
 * itself, Azure OpenAI (through `AzureOpenAI`: `api-key` header, deployment in the path, `api-version` query), and
 * any OpenAI-compatible base URL (vLLM, LM Studio, LiteLLM, Gemini's or Bedrock's OpenAI-compatible endpoints).
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError, AzureOpenAI, OpenAI } from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionAssistantMessageParam,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionTokenLogprob,
  ChatCompletionTool,
  ChatCompletionToolChoiceOption,
} from 'openai/resources/chat/completions';
import type { ResponseFormatJSONObject, ResponseFormatJSONSchema } from 'openai/resources/shared';
import type {
  ChatCompletion,
  ChatFinishReason,
  ChatMessage,
  ChatModel,
  ChatModelRequest,
  ChatResponseFormat,
  ChatStreamEvent,
  ChatTokenLogprob,
  ChatToolCall,
  ChatToolChoice,
  ChatUsage,
} from './chat-model.ts';
import { createUpstreamError, readRetryAfterSeconds } from './provider-errors.ts';
import type { UpstreamFailure } from './provider-errors.ts';
import { refuseJsonObjectSchema, refuseOptions, refuseVendorFields } from './request-support.ts';
import { connectionOptions } from './http-dispatcher.ts';
import { longestLimitMs, startUpstreamCall } from './upstream-call.ts';
import { upstreamEvents } from './upstream-events.ts';

/** The providers this adapter serves. */
export type OpenAiProviderKind = 'openai' | 'azure-openai' | 'openai-compatible';

/** How to reach one OpenAI-style provider. */
export interface OpenAiChatModelOptions {
  /** The provider's configured name (the `provider` of `provider/model`). */
  readonly provider: string;
  readonly kind: OpenAiProviderKind;
  /** Required for `openai` and `azure-openai`; an OpenAI-compatible server without one gets no Authorization header. */
  readonly apiKey?: string;
  /** OpenAI: defaults to https://api.openai.com/v1. Azure: the resource endpoint. OpenAI-compatible: required. */
  readonly baseUrl?: string;
  /** Azure's `api-version`. */
  readonly apiVersion?: string;
  readonly timeoutMs: number;
  /** See `upstream-call.ts`. */
  readonly firstTokenTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
  readonly totalTimeoutMs?: number;
  /**
   * The field carrying `maxTokens`. OpenAI's reasoning models only take `max_completion_tokens`; many compatible
   * servers and older Azure API versions only `max_tokens`. Defaults to `max_completion_tokens` for `openai` and
   * `max_tokens` otherwise.
   */
  readonly maxTokensParameter?: 'max_tokens' | 'max_completion_tokens';
  /**
   * The request fields fhirgate does not know (`ChatGenerationOptions.vendorFields`) this provider receives as sent;
   * any other is refused by name. Default none.
   */
  readonly passThroughFields?: readonly string[];
}

const OPENAI_BASE_URL = 'https://api.openai.com/v1';

/** Creates the model, and its SDK client once; throws when a required option is missing. */
export function createOpenAiChatModel(options: OpenAiChatModelOptions): ChatModel {
  const client = createClient(options);
  const { provider, timeoutMs } = options;
  const timeouts = { timeoutMs, firstTokenTimeoutMs: options.firstTokenTimeoutMs, totalTimeoutMs: options.totalTimeoutMs, connectTimeoutMs: options.connectTimeoutMs };
  const maxTokensParameter = options.maxTokensParameter ?? (options.kind === 'openai' ? 'max_completion_tokens' : 'max_tokens');
  const passThrough: ReadonlySet<string> = new Set(options.passThroughFields ?? []);
  const wire: WireChoices = { maxTokensParameter, kind: options.kind, passThrough };

  return {
    provider,

    // Every OpenAI field goes on as it is. `top_k` and a schema beside `json_object` are no OpenAI fields: a
    // compatible server (vLLM, LM Studio, llama.cpp's, ...) takes them, OpenAI and Azure refuse them. A field
    // fhirgate does not know goes on only where the operator listed it: a gateway upstream (LiteLLM) reads some as
    // routing instructions (`fallbacks`, `user_config`, `api_base`); a schema only constrains the reply's format.
    checkRequest(request) {
      const label = { provider, kind: KIND_LABELS[options.kind] };
      if (options.kind !== 'openai-compatible') {
        refuseOptions(label, request, ['topK']);
        refuseJsonObjectSchema(label, request, 'send the schema as response_format json_schema (structured outputs)');
      }
      refuseVendorFields(label, request, passThrough);
    },

    async complete(request: ChatModelRequest): Promise<ChatCompletion> {
      const call = startUpstreamCall(provider, request.signal, timeouts);
      // Once the SDK returns the answer it has read the body to its end: nothing of the call is left to release.
      let answered = false;
      try {
        const completion = await client.chat.completions.create(
          Object.assign(buildParameters(request, wire), { stream: false as const }) as ChatCompletionCreateParamsNonStreaming,
          { signal: call.signal, headers: request.traceHeaders },
        );
        answered = true;
        const choice = completion.choices?.[0];
        if (choice === undefined) {
          throw createUpstreamError(provider, { kind: 'malformed_response' });
        }
        const refused = choice.message.content === null && typeof choice.message.refusal === 'string';
        const toolCalls = readToolCalls(choice.message.tool_calls);
        const logprobs = choice.logprobs?.content;
        return {
          text: choice.message.content ?? choice.message.refusal ?? '',
          ...(toolCalls.length > 0 ? { toolCalls } : {}),
          finishReason: refused ? 'content_filter' : readFinishReason(choice.finish_reason, toolCalls.length > 0),
          usage: readUsage(completion.usage),
          ...(logprobs ? { logprobs: readLogprobs(logprobs) } : {}),
        };
      } catch (error) {
        throw call.toError(error, describeOpenAiError);
      } finally {
        call.finish(answered);
      }
    },

    stream(request: ChatModelRequest): AsyncIterableIterator<ChatStreamEvent> {
      let finishReason: ChatFinishReason | undefined;
      let usage: ChatUsage | undefined;
      let calls = 0;
      return upstreamEvents<ChatCompletionChunk>({
        start: () => startUpstreamCall(provider, request.signal, timeouts, true),
        open: (call) =>
          client.chat.completions.create(
            Object.assign(buildParameters(request, wire), { stream: true as const, stream_options: { include_usage: true } }) as ChatCompletionCreateParamsStreaming,
            { signal: call.signal, headers: request.traceHeaders },
          ),
        map: (chunk, emit) => {
          // Azure opens with a chunk that has no choices (its prompt filter verdict); the usage chunk has none either.
          const choice = chunk.choices?.[0];
          const text = choice?.delta?.content ?? choice?.delta?.refusal;
          if (text) {
            const logprobs = choice?.logprobs?.content;
            emit(logprobs ? { type: 'text', text, logprobs: readLogprobs(logprobs) } : { type: 'text', text });
          }
          if (choice?.delta?.tool_calls) {
            for (const fragment of readToolCallFragments(choice.delta.tool_calls)) {
              calls = Math.max(calls, fragment.index + 1);
              emit(fragment);
            }
          }
          if (choice?.finish_reason) {
            finishReason = readFinishReason(choice.finish_reason, calls > 0);
          }
          usage = readUsage(chunk.usage) ?? usage;
        },
        end: () => {
          if (finishReason === undefined) {
            throw createUpstreamError(provider, { kind: 'stream_incomplete' });
          }
          return { type: 'finish', finishReason, usage };
        },
        describe: describeOpenAiError,
      });
    },
  };
}

function createClient(options: OpenAiChatModelOptions): OpenAI {
  // Every option that the SDK would otherwise read from the environment (OPENAI_BASE_URL, OPENAI_ORG_ID, OPENAI_LOG,
  // ...) is given explicitly, so only fhirgate's configuration decides where a request goes. Retries belong to
  // fhirgate, and the SDK's logger stays off: at debug level it prints request details.
  const common = {
    maxRetries: 0,
    timeout: longestLimitMs(options),
    logLevel: 'off',
    organization: null,
    project: null,
    ...connectionOptions(options.connectTimeoutMs),
  } as const;
  switch (options.kind) {
    case 'openai':
      return new OpenAI({
        ...common,
        apiKey: requireOption(options, 'apiKey'),
        adminAPIKey: null,
        baseURL: options.baseUrl ?? OPENAI_BASE_URL,
      });
    case 'azure-openai':
      return new AzureOpenAI({
        ...common,
        apiKey: requireOption(options, 'apiKey'),
        apiVersion: requireOption(options, 'apiVersion'),
        baseURL: toAzureBaseUrl(requireOption(options, 'baseUrl')),
      });
    case 'openai-compatible':
      return new OpenAI({
        ...common,
        // The SDK insists on a key; a local server that needs none gets no Authorization header at all.
        apiKey: options.apiKey ?? 'no-key',
        adminAPIKey: null,
        baseURL: requireOption(options, 'baseUrl'),
        defaultHeaders: options.apiKey === undefined ? { Authorization: null } : undefined,
      });
  }
}

function requireOption(options: OpenAiChatModelOptions, name: 'apiKey' | 'baseUrl' | 'apiVersion'): string {
  const value = options[name];
  if (value === undefined || value === '') {
    throw new Error(`LLM provider '${options.provider}' (${options.kind}) needs ${name}.`);
  }
  return value;
}

// Azure's endpoint is the resource (https://name.openai.azure.com); the API lives under /openai. An endpoint
// given with /openai already is taken as it is.
function toAzureBaseUrl(endpoint: string): string {
  const trimmed = endpoint.replace(/\/+$/, '');
  return trimmed.endsWith('/openai') ? trimmed : `${trimmed}/openai`;
}

/** How this provider names things on the wire. */
interface WireChoices {
  readonly maxTokensParameter: 'max_tokens' | 'max_completion_tokens';
  readonly kind: OpenAiProviderKind;
  /** The fields fhirgate does not know that go on as sent (`passThroughFields`). */
  readonly passThrough: ReadonlySet<string>;
}

const KIND_LABELS: Readonly<Record<OpenAiProviderKind, string>> = { openai: 'OpenAI', 'azure-openai': 'Azure OpenAI', 'openai-compatible': 'OpenAI-compatible' };

function buildParameters(request: ChatModelRequest, wire: WireChoices): Record<string, unknown> & { model: string; messages: ChatCompletionMessageParam[] } {
  const options = request.options ?? {};
  const tools = request.tools ?? [];
  // Servers that are only OpenAI-compatible may not know the `developer` role (it is recent): they get `system`.
  const developerRole = wire.kind === 'openai-compatible' ? 'system' : 'developer';
  // First, so that no field of fhirgate's own can be overridden by one of the server's. Only the listed ones:
  // `checkRequest` refused the others, and a path that skipped it must still send nothing unlisted. Then fhirgate's
  // fields one by one (a literal with spreads and a computed name costs a turn tens of µs); unset ones stay unsent.
  const parameters = listedFields(options.vendorFields, wire.passThrough) as Record<string, unknown> & { model: string; messages: ChatCompletionMessageParam[] };
  parameters.model = request.model;
  parameters.messages = request.messages.map((message) => toOpenAiMessage(message, developerRole));
  // OpenAI refuses tool_choice and parallel_tool_calls in a request without tools.
  if (tools.length > 0) {
    parameters.tools = tools.map(
      (tool): ChatCompletionTool => ({
        type: 'function',
        function: { name: tool.name, description: tool.description, parameters: { ...tool.parameters }, ...(tool.strict === undefined ? {} : { strict: tool.strict }) },
      }),
    );
    parameters.tool_choice = request.toolChoice === undefined ? undefined : toToolChoice(request.toolChoice);
    parameters.parallel_tool_calls = options.parallelToolCalls;
  }
  parameters[wire.maxTokensParameter] = request.maxTokens;
  parameters.temperature = request.temperature;
  parameters.top_p = options.topP;
  parameters.top_k = wire.kind === 'openai-compatible' ? options.topK : undefined;
  parameters.stop = options.stop ? [...options.stop] : undefined;
  parameters.seed = options.seed;
  parameters.user = options.endUser?.user;
  parameters.safety_identifier = options.endUser?.safetyIdentifier;
  parameters.presence_penalty = options.presencePenalty;
  parameters.frequency_penalty = options.frequencyPenalty;
  parameters.logit_bias = options.logitBias ? { ...options.logitBias } : undefined;
  parameters.response_format = options.responseFormat ? toResponseFormat(options.responseFormat, wire.kind) : undefined;
  parameters.logprobs = options.logprobs ? true : undefined;
  parameters.top_logprobs = options.logprobs?.top || undefined;
  parameters.reasoning_effort = options.reasoningEffort;
  parameters.store = options.store;
  // OpenAI refuses metadata without store: kept on fhirgate's record then, not sent.
  parameters.metadata = options.store && options.metadata ? { ...options.metadata } : undefined;
  if (options.openAiOnly) {
    Object.assign(parameters, options.openAiOnly);
  }
  return parameters;
}

function listedFields(fields: Readonly<Record<string, unknown>> | undefined, listed: ReadonlySet<string>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields ?? {}).filter(([name]) => listed.has(name)));
}

/** JSON mode with the schema OpenAI-compatible servers take beside it (`checkRequest` refused it for the others). */
type JsonObjectWithSchema = ResponseFormatJSONObject & { schema?: Record<string, unknown> };

function toResponseFormat(format: ChatResponseFormat, kind: OpenAiProviderKind): JsonObjectWithSchema | ResponseFormatJSONSchema {
  if (format.type === 'json_object') {
    const jsonMode: JsonObjectWithSchema = { type: 'json_object' };
    if (format.schema && kind === 'openai-compatible') {
      jsonMode.schema = { ...format.schema };
    }
    return jsonMode;
  }
  const { name, description, schema, strict } = format;
  return { type: 'json_schema', json_schema: { name, description, schema: schema ? { ...schema } : undefined, strict } };
}

function toOpenAiMessage(message: ChatMessage, developerRole: 'developer' | 'system'): ChatCompletionMessageParam {
  switch (message.role) {
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
    // Plain literals, a `name` only where the message has one: a spread in an object literal costs a turn with a long
    // history tens of µs (every message of it is converted).
    case 'assistant': {
      if (message.toolCalls && message.toolCalls.length > 0) {
        const withCalls: ChatCompletionAssistantMessageParam = {
          role: 'assistant',
          // OpenAI's own replies with calls and no text carry null, not an empty string.
          content: message.content === '' ? null : message.content,
          tool_calls: message.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })),
        };
        if (message.name !== undefined) {
          withCalls.name = message.name;
        }
        return withCalls;
      }
      return message.name === undefined ? { role: 'assistant', content: message.content } : { role: 'assistant', content: message.content, name: message.name };
    }
    default: {
      // Text parts go as the client sent them: the provider joins them as it does for its own clients.
      const content = message.parts ? message.parts.map((text) => ({ type: 'text' as const, text })) : message.content;
      const role = message.role === 'developer' ? developerRole : message.role;
      return (message.name === undefined ? { role, content } : { role, content, name: message.name }) as ChatCompletionMessageParam;
    }
  }
}

function toToolChoice(choice: ChatToolChoice): ChatCompletionToolChoiceOption {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

// Calls of other kinds (`custom` tools) are never offered by fhirgate, so only function calls are read.
function readToolCalls(calls: readonly ChatCompletionMessageToolCall[] | undefined): ChatToolCall[] {
  const read: ChatToolCall[] = [];
  for (const call of calls ?? []) {
    if (call.type === 'function') {
      read.push({ id: call.id, name: call.function.name, arguments: call.function.arguments });
    }
  }
  return read;
}

type ToolCallDelta = NonNullable<ChatCompletionChunk.Choice.Delta['tool_calls']>[number];

/** A stream's tool-call deltas as port events: id and name where the provider sent them, then argument text. */
function readToolCallFragments(deltas: readonly ToolCallDelta[] | null | undefined): Extract<ChatStreamEvent, { type: 'tool_call' }>[] {
  const fragments: Extract<ChatStreamEvent, { type: 'tool_call' }>[] = [];
  for (const [position, delta] of (deltas ?? []).entries()) {
    const id = delta.id || undefined;
    const name = delta.function?.name || undefined;
    const text = delta.function?.arguments ?? '';
    if (id === undefined && name === undefined && text === '') {
      continue;
    }
    // Some OpenAI-compatible servers leave `index` out when each delta holds whole calls.
    const index = typeof delta.index === 'number' ? delta.index : position;
    fragments.push({ type: 'tool_call', index, ...(id === undefined ? {} : { id }), ...(name === undefined ? {} : { name }), arguments: text });
  }
  return fragments;
}

function readLogprobs(entries: readonly ChatCompletionTokenLogprob[]): ChatTokenLogprob[] {
  return entries.map((entry) => ({
    token: entry.token,
    logprob: entry.logprob,
    bytes: entry.bytes ?? null,
    topLogprobs: (entry.top_logprobs ?? []).map((top) => ({ token: top.token, logprob: top.logprob, bytes: top.bytes ?? null })),
  }));
}

// Some OpenAI-compatible servers finish a reply with calls as `stop`; the calls are what tell.
function readFinishReason(reason: string | null | undefined, madeCalls: boolean): ChatFinishReason {
  if (reason === 'length' || reason === 'content_filter' || reason === 'tool_calls') {
    return reason;
  }
  return madeCalls || reason === 'function_call' ? 'tool_calls' : 'stop';
}

function readUsage(usage: { prompt_tokens?: number; completion_tokens?: number } | null | undefined): ChatUsage | undefined {
  if (!usage || typeof usage.prompt_tokens !== 'number' || typeof usage.completion_tokens !== 'number') {
    return undefined;
  }
  return { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens };
}

function describeOpenAiError(error: unknown): UpstreamFailure | undefined {
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
    // An error event inside a stream: the SDK raises it without a status.
    return { kind: 'stream_error', type: error.type };
  }
  return {
    kind: 'http',
    status: error.status,
    retryAfterSeconds: readRetryAfterSeconds(error.headers),
    type: error.type,
    code: error.code ?? undefined,
    requestId: error.requestID ?? undefined,
  };
}
