// Ollama's native chat API on the wire: newline-delimited JSON, streamed unless `stream: false`, each line a
// partial `message`, the last with `done: true`, `done_reason` and the eval counts; errors are `{error}`.
import { isPlainObject } from './behaviour.ts';
import { readOllamaOutputOptions } from './output-options.ts';
import { readTextContent } from './provider-format.ts';
import type { ChatRequest, NormalizedMessage, NormalizedTool, NormalizedToolCall, PlannedReply, ProviderFormat, StreamFrames, TokenLogprob } from './provider-format.ts';

/** The Ollama /api/chat format. */
export function createOllamaFormat(): ProviderFormat {
  return {
    streamContentType: 'application/x-ndjson',
    readChatRequest: readOllamaChatRequest,
    renderCompletion: (_request, reply) => JSON.stringify(renderFinalLine(reply, reply.text, true)),
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
  const messages = body.messages === undefined ? [] : readOllamaMessages(body.messages);
  if (typeof messages === 'string') {
    return messages;
  }
  const tools = readOllamaTools(body.tools);
  if (typeof tools === 'string') {
    return tools;
  }
  const output = readOllamaOutputOptions(body);
  if (typeof output === 'string') {
    return output;
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
    tools,
    output,
  };
}

// Ollama's server decodes the body into Go structs: a field of the wrong type is a 400 with the decoder's message.
function typeError(value: string, field: string, type: string): string {
  return `json: cannot unmarshal ${value} into Go struct field ${field} of type ${type}`;
}

function describeJsonType(value: unknown): string {
  return Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value === 'object' ? 'object' : typeof value;
}

/** Reads `messages`: an assistant's `tool_calls` (arguments are objects, there are no ids), a tool result's `tool_name`. */
function readOllamaMessages(value: unknown): NormalizedMessage[] | string {
  if (!Array.isArray(value)) {
    return typeError(describeJsonType(value), 'ChatRequest.messages', '[]api.Message');
  }
  const messages: NormalizedMessage[] = [];
  for (const message of value) {
    if (!isPlainObject(message) || typeof message.role !== 'string') {
      return 'each message needs a string role';
    }
    const normalized: NormalizedMessage = { role: message.role, content: readTextContent(message.content) };
    if (message.tool_calls !== undefined && message.tool_calls !== null) {
      const calls = readOllamaToolCalls(message.tool_calls);
      if (typeof calls === 'string') {
        return calls;
      }
      if (calls.length > 0) {
        normalized.toolCalls = calls;
      }
    }
    if (typeof message.tool_name === 'string') {
      normalized.toolName = message.tool_name;
    }
    messages.push(normalized);
  }
  return messages;
}

function readOllamaToolCalls(value: unknown): NormalizedToolCall[] | string {
  if (!Array.isArray(value)) {
    return typeError(describeJsonType(value), 'Message.messages.tool_calls', '[]api.ToolCall');
  }
  const calls: NormalizedToolCall[] = [];
  for (const call of value) {
    if (!isPlainObject(call) || !isPlainObject(call.function) || typeof call.function.name !== 'string') {
      return 'each tool call needs a function with a name';
    }
    const input = call.function.arguments ?? {};
    if (!isPlainObject(input)) {
      return typeError(describeJsonType(input), 'ToolCallFunction.messages.tool_calls.function.arguments', 'api.ToolCallFunctionArguments');
    }
    calls.push({ name: call.function.name, arguments: JSON.stringify(input) });
  }
  return calls;
}

/** Reads `tools`: `{type: 'function', function: {name, description?, parameters?}}` each. */
function readOllamaTools(value: unknown): NormalizedTool[] | string {
  if (value === undefined || value === null) {
    return [];
  }
  if (!Array.isArray(value)) {
    return typeError(describeJsonType(value), 'ChatRequest.tools', 'api.Tools');
  }
  const tools: NormalizedTool[] = [];
  for (const [index, tool] of value.entries()) {
    const definition = isPlainObject(tool) ? tool.function : undefined;
    // Stricter than Ollama, which would take a nameless tool: no model can call one.
    if (!isPlainObject(definition) || typeof definition.name !== 'string' || definition.name === '') {
      return `tools[${index}]: a tool needs function.name`;
    }
    const parameters = definition.parameters ?? {};
    if (!isPlainObject(parameters)) {
      return typeError(describeJsonType(parameters), 'Tool.tools.function.parameters', 'api.ToolFunctionParameters');
    }
    const normalized: NormalizedTool = { name: definition.name, parameters };
    if (typeof definition.description === 'string') {
      normalized.description = definition.description;
    }
    tools.push(normalized);
  }
  return tools;
}

/** The message of a reply line: the text, and on the line that carries them, the calls (whole, without ids). */
function renderMessage(reply: PlannedReply, content: string, withCalls: boolean): Record<string, unknown> {
  if (!withCalls || reply.toolCalls.length === 0) {
    return { role: 'assistant', content };
  }
  return { role: 'assistant', content, tool_calls: reply.toolCalls.map((call) => ({ function: { name: call.name, arguments: call.input } })) };
}

/** Ollama's `logprobs` of a line: each token with its alternatives. */
function renderLogprobs(logprobs: readonly TokenLogprob[]): Record<string, unknown>[] {
  return logprobs.map((token) => ({ token: token.token, logprob: token.logprob, top_logprobs: token.top }));
}

function renderFinalLine(reply: PlannedReply, content: string, withCalls: boolean): Record<string, unknown> {
  return {
    // A whole reply's line carries every token's; a stream's last line, none (they came with the tokens).
    ...(reply.logprobs && content !== '' ? { logprobs: renderLogprobs(reply.logprobs) } : {}),
    model: reply.model,
    created_at: new Date(reply.createdAt * 1000).toISOString(),
    message: renderMessage(reply, content, withCalls),
    done: true,
    // Ollama says `stop` when the model made calls; only the calls tell.
    done_reason: reply.finishReason === 'tool_calls' ? 'stop' : reply.finishReason,
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
    renderToken: reply.logprobs
      ? (text, index) => `${tokenPrefix}${JSON.stringify(text)}},"done":false,"logprobs":${JSON.stringify(renderLogprobs(reply.logprobs?.slice(index, index + 1) ?? []))}}\n`
      : (text) => `${tokenPrefix}${JSON.stringify(text)}},"done":false}\n`,
    // Ollama streams the calls whole, on one line of their own.
    toolCallFrames: reply.toolCalls.length === 0 ? [] : [`${head},"message":${JSON.stringify(renderMessage(reply, '', true))},"done":false}\n`],
    closing: `${JSON.stringify(renderFinalLine(reply, '', false))}\n`,
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
