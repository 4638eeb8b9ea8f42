// Anthropic Messages on the wire: the JSON `message`, the named SSE events (message_start … message_stop)
// that @anthropic-ai/sdk accumulates, and the `{type: 'error', error: {type, message}}` error body.
import { readMessages, readTextContent } from './provider-format.ts';
import type { ChatRequest, PlannedReply, ProviderFormat, StreamFrames } from './provider-format.ts';

/** The Anthropic Messages format. */
export function createAnthropicFormat(): ProviderFormat {
  return {
    streamContentType: 'text/event-stream; charset=utf-8',
    readChatRequest: readAnthropicChatRequest,
    renderCompletion: renderAnthropicMessage,
    createStreamFrames: createAnthropicStreamFrames,
    renderError: renderAnthropicError,
    responseHeaders: (sequence) => ({ 'request-id': `req_emulator_${sequence}` }),
  };
}

function readAnthropicChatRequest(body: Record<string, unknown>): ChatRequest | string {
  if (typeof body.model !== 'string' || body.model === '') {
    return 'model: Field required';
  }
  // Anthropic, unlike OpenAI, rejects a request without max_tokens; a gateway that forgets it must fail here too.
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    return 'max_tokens: Field required';
  }
  const messages = readMessages(body.messages);
  if (typeof messages === 'string') {
    return `messages: ${messages}`;
  }
  if (body.system !== undefined) {
    messages.unshift({ role: 'system', content: readTextContent(body.system) });
  }
  return { model: body.model, messages, stream: body.stream === true, maxTokens: body.max_tokens, includeUsage: false };
}

function renderStopReason(reply: PlannedReply): string {
  return reply.finishReason === 'length' ? 'max_tokens' : 'end_turn';
}

function renderAnthropicMessage(_request: ChatRequest, reply: PlannedReply): string {
  return JSON.stringify({
    id: `msg_emulator_${reply.sequence}`,
    type: 'message',
    role: 'assistant',
    model: reply.model,
    content: [{ type: 'text', text: reply.text }],
    stop_reason: renderStopReason(reply),
    stop_sequence: null,
    usage: { input_tokens: reply.promptTokens, output_tokens: reply.completionTokens },
  });
}

function renderEvent(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

function createAnthropicStreamFrames(_request: ChatRequest, reply: PlannedReply): StreamFrames {
  const messageStart = renderEvent('message_start', {
    type: 'message_start',
    message: {
      id: `msg_emulator_${reply.sequence}`,
      type: 'message',
      role: 'assistant',
      model: reply.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // Anthropic reports a token already spent here and the cumulative total in message_delta; a client
      // that adds the two instead of replacing one with the other double-counts, as it would upstream.
      usage: { input_tokens: reply.promptTokens, output_tokens: 1 },
    },
  });
  const blockStart = renderEvent('content_block_start', {
    type: 'content_block_start',
    index: 0,
    content_block: { type: 'text', text: '' },
  });
  const tokenPrefix = 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":';
  return {
    opening: messageStart + blockStart + renderEvent('ping', { type: 'ping' }),
    renderToken: (text) => `${tokenPrefix}${JSON.stringify(text)}}}\n\n`,
    closing:
      renderEvent('content_block_stop', { type: 'content_block_stop', index: 0 }) +
      renderEvent('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: renderStopReason(reply), stop_sequence: null },
        usage: { output_tokens: reply.completionTokens },
      }) +
      renderEvent('message_stop', { type: 'message_stop' }),
    malformed: 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":\n\n',
    renderInBandError: (message) =>
      renderEvent('error', { type: 'error', error: { type: 'overloaded_error', message } }),
  };
}

// Anthropic's error `type` per status; the SDK picks its typed error class from the status.
const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

function renderAnthropicError(status: number, message: string): string {
  const type = ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  return JSON.stringify({ type: 'error', error: { type, message } });
}

/** GET /v1/models in Anthropic's list shape (chosen when the request carries `anthropic-version`). */
export function renderAnthropicModelList(models: readonly string[]): string {
  return JSON.stringify({
    data: models.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
    has_more: false,
    first_id: models[0] ?? null,
    last_id: models[models.length - 1] ?? null,
  });
}
