// Anthropic Messages on the wire: the JSON `message`, the named SSE events (message_start … message_stop)
// that @anthropic-ai/sdk accumulates, and the `{type: 'error', error: {type, message}}` error body.
import { readAnthropicMessages, readAnthropicTools } from './anthropic-messages.ts';
import { readAnthropicOutputOptions } from './output-options.ts';
import { readTextContent } from './provider-format.ts';
import type { ChatRequest, PlannedReply, PlannedToolCall, ProviderFormat, StreamFrames } from './provider-format.ts';
import { splitArguments } from './reply-plan.ts';

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
  const messages = readAnthropicMessages(body.messages);
  if (typeof messages === 'string') {
    return messages;
  }
  const tools = readAnthropicTools(body);
  if (typeof tools === 'string') {
    return tools;
  }
  const output = readAnthropicOutputOptions(body);
  if (typeof output === 'string') {
    return output;
  }
  if (body.system !== undefined) {
    messages.unshift({ role: 'system', content: readTextContent(body.system) });
  }
  return { model: body.model, messages, stream: body.stream === true, maxTokens: body.max_tokens, includeUsage: false, ...tools, output };
}

function renderStopReason(reply: PlannedReply): string {
  switch (reply.finishReason) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
      return 'tool_use';
    default:
      return 'end_turn';
  }
}

/** A call's id: the behaviour's, or `toolu_<sequence>_<index>`. */
function toolUseId(reply: PlannedReply, call: PlannedToolCall): string {
  return call.id ?? `toolu_${reply.sequence}_${call.index}`;
}

// A reply that only calls has no text block, as Anthropic's has none; any other reply has one, first.
function hasTextBlock(reply: PlannedReply): boolean {
  return reply.tokens.length > 0 || reply.toolCalls.length === 0;
}

function renderAnthropicMessage(_request: ChatRequest, reply: PlannedReply): string {
  return JSON.stringify({
    id: `msg_emulator_${reply.sequence}`,
    type: 'message',
    role: 'assistant',
    model: reply.model,
    content: [
      ...(hasTextBlock(reply) ? [{ type: 'text', text: reply.text }] : []),
      ...reply.toolCalls.map((call) => ({ type: 'tool_use', id: toolUseId(reply, call), name: call.name, input: call.input })),
    ],
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
  const textBlock = hasTextBlock(reply);
  const blockStart = textBlock
    ? renderEvent('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
    : '';
  const tokenPrefix = 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":';
  const blockCount = (textBlock ? 1 : 0) + reply.toolCalls.length;
  return {
    opening: messageStart + blockStart + renderEvent('ping', { type: 'ping' }),
    renderToken: (text) => `${tokenPrefix}${JSON.stringify(text)}}}\n\n`,
    toolCallFrames: renderToolUseEvents(reply, textBlock ? 1 : 0),
    closing:
      renderEvent('content_block_stop', { type: 'content_block_stop', index: blockCount - 1 }) +
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

/**
 * Each call is a content block of its own, after the text block (if any): the block before it stops, the call's
 * `tool_use` block starts with an empty input, and its input arrives as `input_json_delta` pieces.
 */
function renderToolUseEvents(reply: PlannedReply, firstBlock: number): string[] {
  const frames: string[] = [];
  for (const call of reply.toolCalls) {
    const index = firstBlock + call.index;
    const stopPrevious = index > 0 ? renderEvent('content_block_stop', { type: 'content_block_stop', index: index - 1 }) : '';
    frames.push(
      stopPrevious +
        renderEvent('content_block_start', {
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: toolUseId(reply, call), name: call.name, input: {} },
        }),
    );
    // A call without arguments streams one empty piece, as Anthropic's do: the client must take that as `{}`.
    const pieces = Object.keys(call.input).length === 0 ? [''] : splitArguments(call.arguments);
    for (const piece of pieces) {
      frames.push(renderEvent('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } }));
    }
  }
  return frames;
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
