// OpenAI chat completions on the wire (also Azure OpenAI and "OpenAI-compatible" servers): the JSON
// `chat.completion`, the SSE `chat.completion.chunk` stream ending in `data: [DONE]`, and the
// `{error: {message, type, param, code}}` body the openai package turns into its typed APIError.
import { isPlainObject } from './behaviour.ts';
import { readOpenAiMessages, readOpenAiTools } from './openai-messages.ts';
import { readOpenAiOutputOptions } from './output-options.ts';
import type { ChatRequest, PlannedReply, PlannedToolCall, ProviderFormat, StreamFrames, TokenLogprob } from './provider-format.ts';
import { splitArguments } from './reply-plan.ts';

// Azure opens every stream with a chunk that has no choices, only the prompt's content-filter verdict.
// Gateways that read `choices[0]` unguarded break on it against real Azure, so the emulator sends it too.
const AZURE_PROMPT_FILTER_CHUNK = `data: ${JSON.stringify({
  choices: [],
  created: 0,
  id: '',
  model: '',
  object: '',
  prompt_filter_results: [
    {
      prompt_index: 0,
      content_filter_results: {
        hate: { filtered: false, severity: 'safe' },
        self_harm: { filtered: false, severity: 'safe' },
        sexual: { filtered: false, severity: 'safe' },
        violence: { filtered: false, severity: 'safe' },
      },
    },
  ],
})}\n\n`;

/** The openai format; `azure` adds Azure's quirks (the prompt-filter chunk) and takes the model from the deployment path. */
export function createOpenAiFormat(variant: 'openai' | 'azure'): ProviderFormat {
  return {
    streamContentType: 'text/event-stream; charset=utf-8',
    readChatRequest: (body, pathModel) => readOpenAiChatRequest(body, pathModel),
    renderCompletion: renderOpenAiCompletion,
    createStreamFrames: (request, reply) => createOpenAiStreamFrames(request, reply, variant === 'azure'),
    renderError: renderOpenAiError,
    responseHeaders: (sequence) => ({ 'x-request-id': `req_emulator_${sequence}` }),
  };
}

function readOpenAiChatRequest(body: Record<string, unknown>, pathModel: string | undefined): ChatRequest | string {
  const model = pathModel ?? body.model;
  if (typeof model !== 'string' || model === '') {
    return 'you must provide a model parameter';
  }
  const messages = readOpenAiMessages(body.messages);
  if (typeof messages === 'string') {
    return messages;
  }
  const tools = readOpenAiTools(body);
  if (typeof tools === 'string') {
    return tools;
  }
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (maxTokens !== undefined && maxTokens !== null && (typeof maxTokens !== 'number' || maxTokens < 1)) {
    return 'max_tokens must be a positive integer';
  }
  const output = readOpenAiOutputOptions(body, messages);
  if (typeof output === 'string') {
    return output;
  }
  return {
    model,
    messages,
    stream: body.stream === true,
    maxTokens: typeof maxTokens === 'number' ? maxTokens : undefined,
    includeUsage: isPlainObject(body.stream_options) && body.stream_options.include_usage === true,
    ...tools,
    output,
  };
}

/** OpenAI's `logprobs` of a choice: each token with its UTF-8 bytes and its alternatives. */
function renderLogprobs(logprobs: readonly TokenLogprob[]): Record<string, unknown> {
  const entry = (token: string, logprob: number): Record<string, unknown> => ({ token, logprob, bytes: [...Buffer.from(token, 'utf8')] });
  return {
    content: logprobs.map((token) => ({ ...entry(token.token, token.logprob), top_logprobs: token.top.map((top) => entry(top.token, top.logprob)) })),
    refusal: null,
  };
}

/** A call's id: the behaviour's, or `call_<sequence>_<index>`. */
function callId(reply: PlannedReply, call: PlannedToolCall): string {
  return call.id ?? `call_${reply.sequence}_${call.index}`;
}

function renderUsage(reply: PlannedReply): Record<string, number> {
  return {
    prompt_tokens: reply.promptTokens,
    completion_tokens: reply.completionTokens,
    total_tokens: reply.promptTokens + reply.completionTokens,
  };
}

function renderOpenAiCompletion(_request: ChatRequest, reply: PlannedReply): string {
  return JSON.stringify({
    id: `chatcmpl-emulator-${reply.sequence}`,
    object: 'chat.completion',
    created: reply.createdAt,
    model: reply.model,
    // With n, every choice is the same reply.
    choices: Array.from({ length: reply.choices }, (_, index) => ({
      index,
      message: renderMessage(reply),
      logprobs: reply.logprobs ? renderLogprobs(reply.logprobs) : null,
      finish_reason: reply.finishReason,
    })),
    usage: renderUsage(reply),
    system_fingerprint: null,
  });
}

// With calls, OpenAI's content is null unless the model also wrote text.
function renderMessage(reply: PlannedReply): Record<string, unknown> {
  if (reply.toolCalls.length === 0) {
    return { role: 'assistant', content: reply.text, refusal: null, annotations: [] };
  }
  return {
    role: 'assistant',
    content: reply.text === '' ? null : reply.text,
    refusal: null,
    annotations: [],
    tool_calls: reply.toolCalls.map((call) => ({ id: callId(reply, call), type: 'function', function: { name: call.name, arguments: call.arguments } })),
  };
}

/** A call streams as OpenAI's do: its id, type and name with empty arguments, then the arguments in pieces. */
function renderToolCallDeltas(reply: PlannedReply, chunkPrefix: string, chunkSuffix: string): string[] {
  const frames: string[] = [];
  for (const call of reply.toolCalls) {
    const opening = { index: call.index, id: callId(reply, call), type: 'function', function: { name: call.name, arguments: '' } };
    frames.push(`${chunkPrefix}${JSON.stringify({ tool_calls: [opening] })}${chunkSuffix}`);
    for (const piece of splitArguments(call.arguments)) {
      frames.push(`${chunkPrefix}${JSON.stringify({ tool_calls: [{ index: call.index, function: { arguments: piece } }] })}${chunkSuffix}`);
    }
  }
  return frames;
}

function createOpenAiStreamFrames(request: ChatRequest, reply: PlannedReply, azure: boolean): StreamFrames {
  // Every chunk repeats the same envelope; it is serialized once and each token only adds its own text.
  const envelope = JSON.stringify({
    id: `chatcmpl-emulator-${reply.sequence}`,
    object: 'chat.completion.chunk',
    created: reply.createdAt,
    model: reply.model,
    system_fingerprint: null,
  }).slice(0, -1);
  // With include_usage, OpenAI sends `usage: null` on every chunk and the numbers on a last, choice-less one.
  const usageField = request.includeUsage ? ',"usage":null' : '';
  const deltaPrefix = `data: ${envelope},"choices":[{"index":0,"delta":`;
  const deltaSuffix = `,"logprobs":null,"finish_reason":null}]${usageField}}\n\n`;
  const tokenPrefix = `${deltaPrefix}{"content":`;
  const tokenSuffix = `}${deltaSuffix}`;
  // A reply that only calls opens with `content: null`, as OpenAI's does.
  const openingContent = reply.toolCalls.length > 0 && reply.tokens.length === 0 ? 'null' : '""';
  const finishChunk = `data: ${envelope},"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"${reply.finishReason}"}]${usageField}}\n\n`;
  const usageChunk = request.includeUsage
    ? `data: ${envelope},"choices":[],"usage":${JSON.stringify(renderUsage(reply))}}\n\n`
    : '';
  return {
    opening:
      (azure ? AZURE_PROMPT_FILTER_CHUNK : '') +
      `${deltaPrefix}{"role":"assistant","content":${openingContent},"refusal":null}${deltaSuffix}`,
    renderToken: reply.logprobs
      ? (text, index) =>
          `${tokenPrefix}${JSON.stringify(text)}},"logprobs":${JSON.stringify(renderLogprobs(reply.logprobs?.slice(index, index + 1) ?? []))},"finish_reason":null}]${usageField}}\n\n`
      : (text) => tokenPrefix + JSON.stringify(text) + tokenSuffix,
    toolCallFrames: renderToolCallDeltas(reply, deltaPrefix, deltaSuffix),
    closing: finishChunk + usageChunk + 'data: [DONE]\n\n',
    malformed: `data: ${envelope},"choices":[{"index":0,"delta":{"content":\n\n`,
    renderInBandError: (message) =>
      `data: ${JSON.stringify({ error: { message, type: 'server_error', param: null, code: null } })}\n\n`,
  };
}

// OpenAI's error `type`/`code` per status, so tests that branch on them see realistic values.
const ERROR_KINDS: Record<number, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'permission_denied' },
  404: { type: 'invalid_request_error', code: 'model_not_found' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
};

function renderOpenAiError(status: number, message: string): string {
  const kind = ERROR_KINDS[status] ?? { type: status >= 500 ? 'server_error' : 'invalid_request_error', code: null };
  return JSON.stringify({ error: { message, type: kind.type, param: null, code: kind.code } });
}

/** GET /v1/models in OpenAI's list shape. */
export function renderOpenAiModelList(models: readonly string[]): string {
  return JSON.stringify({
    object: 'list',
    data: models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'llm-emulator' })),
  });
}
