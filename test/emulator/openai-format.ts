// OpenAI chat completions on the wire (also Azure OpenAI and "OpenAI-compatible" servers): the JSON
// `chat.completion`, the SSE `chat.completion.chunk` stream ending in `data: [DONE]`, and the
// `{error: {message, type, param, code}}` body the openai package turns into its typed APIError.
import { isPlainObject } from './behaviour.ts';
import { readMessages } from './provider-format.ts';
import type { ChatRequest, PlannedReply, ProviderFormat, StreamFrames } from './provider-format.ts';

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
  const messages = readMessages(body.messages);
  if (typeof messages === 'string') {
    return messages;
  }
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (maxTokens !== undefined && maxTokens !== null && (typeof maxTokens !== 'number' || maxTokens < 1)) {
    return 'max_tokens must be a positive integer';
  }
  return {
    model,
    messages,
    stream: body.stream === true,
    maxTokens: typeof maxTokens === 'number' ? maxTokens : undefined,
    includeUsage: isPlainObject(body.stream_options) && body.stream_options.include_usage === true,
  };
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
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: reply.text, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: reply.finishReason,
      },
    ],
    usage: renderUsage(reply),
    system_fingerprint: null,
  });
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
  const tokenPrefix = `data: ${envelope},"choices":[{"index":0,"delta":{"content":`;
  const tokenSuffix = `},"logprobs":null,"finish_reason":null}]${usageField}}\n\n`;
  const finishChunk = `data: ${envelope},"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"${reply.finishReason}"}]${usageField}}\n\n`;
  const usageChunk = request.includeUsage
    ? `data: ${envelope},"choices":[],"usage":${JSON.stringify(renderUsage(reply))}}\n\n`
    : '';
  return {
    opening:
      (azure ? AZURE_PROMPT_FILTER_CHUNK : '') +
      `data: ${envelope},"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]${usageField}}\n\n`,
    renderToken: (text) => tokenPrefix + JSON.stringify(text) + tokenSuffix,
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
