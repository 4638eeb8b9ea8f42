// Ollama's native chat API on the wire: newline-delimited JSON, streamed unless `stream: false`, each line a
// partial `message`, the last with `done: true`, `done_reason` and the eval counts; errors are `{error}`.
import { isPlainObject } from './behaviour.ts';
import { readMessages } from './provider-format.ts';
import type { ChatRequest, PlannedReply, ProviderFormat, StreamFrames } from './provider-format.ts';

/** The Ollama /api/chat format. */
export function createOllamaFormat(): ProviderFormat {
  return {
    streamContentType: 'application/x-ndjson',
    readChatRequest: readOllamaChatRequest,
    renderCompletion: (_request, reply) => JSON.stringify(renderFinalLine(reply, reply.text)),
    createStreamFrames: createOllamaStreamFrames,
    renderError: (_status, message) => JSON.stringify({ error: message }),
    responseHeaders: () => ({}),
  };
}

function readOllamaChatRequest(body: Record<string, unknown>): ChatRequest | string {
  if (typeof body.model !== 'string' || body.model === '') {
    return 'model is required';
  }
  // Ollama accepts a chat without messages (it only loads the model); the emulator answers it like any other.
  const messages = body.messages === undefined ? [] : readMessages(body.messages);
  if (typeof messages === 'string') {
    return messages;
  }
  // num_predict caps generation; Ollama treats -1 (and the absent default) as "no cap".
  const numberToPredict = isPlainObject(body.options) ? body.options.num_predict : undefined;
  return {
    model: body.model,
    messages,
    // Ollama streams unless told otherwise, the reverse of the other two providers.
    stream: body.stream !== false,
    maxTokens: typeof numberToPredict === 'number' && numberToPredict > 0 ? numberToPredict : undefined,
    includeUsage: false,
  };
}

function renderFinalLine(reply: PlannedReply, content: string): Record<string, unknown> {
  return {
    model: reply.model,
    created_at: new Date(reply.createdAt * 1000).toISOString(),
    message: { role: 'assistant', content },
    done: true,
    done_reason: reply.finishReason,
    total_duration: 0,
    load_duration: 0,
    prompt_eval_count: reply.promptTokens,
    prompt_eval_duration: 0,
    eval_count: reply.completionTokens,
    eval_duration: 0,
  };
}

function createOllamaStreamFrames(_request: ChatRequest, reply: PlannedReply): StreamFrames {
  const head = JSON.stringify({ model: reply.model, created_at: new Date(reply.createdAt * 1000).toISOString() }).slice(0, -1);
  const tokenPrefix = `${head},"message":{"role":"assistant","content":`;
  return {
    opening: '',
    renderToken: (text) => `${tokenPrefix}${JSON.stringify(text)}},"done":false}\n`,
    closing: `${JSON.stringify(renderFinalLine(reply, ''))}\n`,
    malformed: `${tokenPrefix}\n`,
    renderInBandError: (message) => `${JSON.stringify({ error: message })}\n`,
  };
}

/** GET /api/tags in Ollama's shape. */
export function renderOllamaModelList(models: readonly string[]): string {
  return JSON.stringify({
    models: models.map((name) => ({
      name,
      model: name,
      modified_at: '2025-01-01T00:00:00Z',
      size: 0,
      digest: '0'.repeat(64),
      details: {
        parent_model: '',
        format: 'gguf',
        family: 'emulator',
        families: ['emulator'],
        parameter_size: '0B',
        quantization_level: 'none',
      },
    })),
  });
}
