import { appErrorOf } from '../../test/support/app-error.ts';
import { parseChatRequest } from './chat-request.ts';

const hello = [{ role: 'user', content: 'hello' }];
const limits = { maxMessages: 10, maxTokens: 1000 };

describe('the fields of a chat-completions request', () => {
  test('every optional OpenAI field is read into the provider-neutral options', () => {
    const chat = parseChatRequest({
      messages: hello,
      top_p: 0.5,
      top_k: 3,
      stop: 'END',
      seed: 9,
      presence_penalty: 1,
      frequency_penalty: -1,
      logit_bias: { '42': -100 },
      response_format: { type: 'json_schema', json_schema: { name: 'vitals', schema: { type: 'object' }, strict: true } },
      n: 1,
      logprobs: true,
      top_logprobs: 2,
      reasoning_effort: 'low',
      user: 'u-1',
      safety_identifier: 's-1',
      store: true,
      metadata: { ward: '7' },
      modalities: ['text'],
      service_tier: 'flex',
      verbosity: 'low',
      prompt_cache_key: 'k',
      prediction: { type: 'content', content: 'draft' },
    });
    expect(chat.options).toEqual({
      topP: 0.5,
      topK: 3,
      stop: ['END'],
      seed: 9,
      presencePenalty: 1,
      frequencyPenalty: -1,
      logitBias: { '42': -100 },
      responseFormat: { type: 'json_schema', name: 'vitals', schema: { type: 'object' }, strict: true },
      logprobs: { top: 2 },
      reasoningEffort: 'low',
      endUser: { user: 'u-1', safetyIdentifier: 's-1' },
      store: true,
      metadata: { ward: '7' },
      openAiOnly: { service_tier: 'flex', verbosity: 'low', prompt_cache_key: 'k', prediction: { type: 'content', content: 'draft' } },
    });
  });

  test('null stands for a field not given, as in OpenAI; a text response format asks for nothing', () => {
    const chat = parseChatRequest({ messages: hello, max_tokens: null, temperature: null, stop: null, tools: null, response_format: { type: 'text' } });
    expect(chat.options).toEqual({});
    expect(chat.maxTokens).toBeUndefined();
    // The record keeps the body as the client sent it.
    expect(chat.body).toMatchObject({ max_tokens: null, stop: null });
  });

  test('max_completion_tokens bounds the reply like max_tokens; both given must agree', () => {
    expect(parseChatRequest({ messages: hello, max_completion_tokens: 300 }, limits).maxTokens).toBe(300);
    expect(parseChatRequest({ messages: hello, max_completion_tokens: 300, max_tokens: 300 }, limits).maxTokens).toBe(300);
    expect(appErrorOf(() => parseChatRequest({ messages: hello, max_completion_tokens: 300, max_tokens: 200 }, limits))).toMatchObject({
      status: 400,
      details: { param: 'max_completion_tokens' },
    });
    expect(appErrorOf(() => parseChatRequest({ messages: hello, max_completion_tokens: 1001 }, limits)).message).toBe('Invalid request: max_completion_tokens: at most 1000.');
  });

  test('developer messages, names and text parts are kept as sent; the turn records each user part', () => {
    const chat = parseChatRequest({
      messages: [
        { role: 'developer', content: [{ type: 'text', text: 'Answer in French.' }] },
        { role: 'user', name: 'alice', content: [{ type: 'text', text: 'hi' }, { type: 'text', text: 'there' }] },
      ],
    });
    expect(chat.messages).toEqual([
      { role: 'developer', content: 'Answer in French.', parts: ['Answer in French.'] },
      { role: 'user', content: 'hithere', parts: ['hi', 'there'], name: 'alice' },
    ]);
  });

  test("an assistant's earlier refusal is what it said; tools keep strict", () => {
    const chat = parseChatRequest({
      messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: null, refusal: 'I cannot help with that.' }, { role: 'user', content: 'b' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' }, strict: true } }],
    });
    expect(chat.messages[1]).toEqual({ role: 'assistant', content: 'I cannot help with that.' });
    expect(chat.tools).toEqual([{ name: 'f', parameters: { type: 'object' }, strict: true }]);
  });

  test("top-level fields fhirgate does not know are kept, as sent, for the provider's check; null ones count as not given", () => {
    const chat = parseChatRequest({ messages: hello, temperature: 0.2, min_p: 0.05, guided_json: { type: 'object' }, top_a: null });
    expect(chat.options).toEqual({ vendorFields: { min_p: 0.05, guided_json: { type: 'object' } } });
    expect(chat.temperature).toBe(0.2);
    expect(parseChatRequest({ messages: hello }).options).toEqual({});
  });

  test.each([
    ['an image part', { messages: [{ role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] }, 'messages.0.content.1.type', 'image_url parts are not supported'],
    ['an audio part', { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } }] }] }, 'messages.0.content.0.type', 'input_audio parts are not supported'],
    ['a file part', { messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'f' } }] }] }, 'messages.0.content.0.type', 'file parts are not supported'],
    ['a cache breakpoint on a part', { messages: [{ role: 'user', content: [{ type: 'text', text: 'x', prompt_cache_breakpoint: { mode: 'explicit' } }] }] }, 'messages.0.content.0.prompt_cache_breakpoint', 'not supported'],
    ['a message field nobody knows', { messages: [{ role: 'user', content: 'x', mood: 'happy' }] }, 'messages.0.mood', 'is not a field fhirgate knows'],
    ['n above 1', { messages: hello, n: 2 }, 'n', 'one choice per request'],
    ['top_logprobs without logprobs', { messages: hello, top_logprobs: 3 }, 'top_logprobs', 'only with logprobs: true'],
    ['audio output', { messages: hello, modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'mp3' } }, 'modalities', 'only text'],
    ['audio settings', { messages: hello, audio: { voice: 'alloy', format: 'mp3' } }, 'audio', 'audio output'],
    ['deprecated functions', { messages: hello, functions: [{ name: 'f' }] }, 'functions', 'use tools'],
    ['a deprecated function_call', { messages: hello, function_call: 'auto' }, 'function_call', 'use tool_choice'],
    ['web search', { messages: hello, web_search_options: {} }, 'web_search_options', 'not supported'],
    ['a function message', { messages: [...hello, { role: 'function', name: 'f', content: 'x' }] }, 'messages.1', 'use tool messages'],
    ["an assistant's function_call", { messages: [{ role: 'assistant', content: 'a', function_call: { name: 'f', arguments: '{}' } }, ...hello] }, 'messages.0.function_call', 'use tool_calls'],
    ['a custom tool', { messages: hello, tools: [{ type: 'custom', custom: { name: 'c' } }] }, 'tools.0.type', 'only function tools'],
    ['allowed_tools as tool choice', { messages: hello, tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [] } } }, 'tool_choice', 'must be none, auto, required'],
    ['a json_schema without a name', { messages: hello, response_format: { type: 'json_schema', json_schema: { schema: {} } } }, 'response_format.json_schema.name', ''],
    ['a reasoning effort OpenAI does not have', { messages: hello, reasoning_effort: 'extreme' }, 'reasoning_effort', ''],
    ['metadata with too long a value', { messages: hello, metadata: { note: 'x'.repeat(513) } }, 'metadata.note', 'at most 512'],
    ['an obfuscated stream', { messages: hello, stream: true, stream_options: { include_obfuscation: true } }, 'stream_options.include_obfuscation', 'does not pad'],
  ])('400 for %s, naming the field', (_name, body, param, words) => {
    const error = appErrorOf(() => parseChatRequest(body));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, details: { param } });
    expect(error.message).toContain(words);
  });
});
