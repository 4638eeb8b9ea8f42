import { appErrorOf } from '../../test/support/app-error.ts';
import { parseResponsesDraft } from './responses-request.ts';

const limits = { maxMessages: 10, maxTokens: 1000 };
const parse = (body: Record<string, unknown>) => parseResponsesDraft({ input: 'hi', ...body }, limits);
const paramOf = (body: Record<string, unknown>): unknown => appErrorOf(() => parse(body)).details?.param;

describe('parseResponsesDraft', () => {
  test("a plain request: the input is one user message, the body is kept as sent, and the provider's options are empty", () => {
    const draft = parseResponsesDraft({ model: 'openai/gpt-4o-mini', input: 'hi', instructions: 'Be brief.', store: null }, limits);
    expect(draft).toMatchObject({ model: 'openai/gpt-4o-mini', instructions: 'Be brief.', stream: false, options: {} });
    expect(draft.items).toEqual([{ kind: 'message', index: 0, role: 'user', text: 'hi' }]);
    expect(draft.body).toEqual({ model: 'openai/gpt-4o-mini', input: 'hi', instructions: 'Be brief.', store: null });
  });

  test('the settings become the chat request the provider port takes, under their chat-completions meaning', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    const draft = parse({
      max_output_tokens: 300,
      temperature: 0.3,
      top_p: 0.9,
      text: { format: { type: 'json_schema', name: 'answer', schema, strict: true }, verbosity: 'low' },
      reasoning: { effort: 'low', summary: null },
      include: ['message.output_text.logprobs', 'reasoning.encrypted_content'],
      top_logprobs: 2,
      parallel_tool_calls: false,
      user: 'clinician-7',
      safety_identifier: 'hash-7',
      service_tier: 'flex',
      prompt_cache_key: 'ward-7',
      // Kept in the prompt's record; not the provider's business: fhirgate is the store.
      store: false,
      metadata: { ward: '7' },
      truncation: 'auto',
    });
    expect(draft.maxTokens).toBe(300);
    expect(draft.temperature).toBe(0.3);
    expect(draft.options).toEqual({
      topP: 0.9,
      parallelToolCalls: false,
      responseFormat: { type: 'json_schema', name: 'answer', schema, strict: true },
      logprobs: { top: 2 },
      reasoningEffort: 'low',
      endUser: { user: 'clinician-7', safetyIdentifier: 'hash-7' },
      openAiOnly: { service_tier: 'flex', verbosity: 'low', prompt_cache_key: 'ward-7' },
    });
  });

  test('function tools are flat, as the Responses API has them; tool_choice names one of them', () => {
    const draft = parse({
      tools: [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: { type: 'object' }, strict: true }, { type: 'function', name: 'now', parameters: null, strict: null }],
      tool_choice: { type: 'function', name: 'now' },
    });
    expect(draft.tools).toEqual([
      { name: 'get_weather', description: 'Weather', parameters: { type: 'object' }, strict: true },
      { name: 'now', parameters: { type: 'object', properties: {} } },
    ]);
    expect(draft.toolChoice).toEqual({ name: 'now' });
    expect(parse({ tools: [] }).tools).toBeUndefined();
  });

  test('previous_response_id names a reply; conversation names a conversation; not both', () => {
    expect(parse({ previous_response_id: 'resp_1a2b-3c' }).previousReplyId).toBe('1a2b-3c');
    expect(parse({ conversation: 'c-1' }).conversationId).toBe('c-1');
    expect(parse({ conversation: { id: 'c-1' } }).conversationId).toBe('c-1');
    expect(paramOf({ previous_response_id: 'resp_1', conversation: 'c-1' })).toBe('conversation');
    expect(paramOf({ previous_response_id: 'chatcmpl-1' })).toBe('previous_response_id');
  });

  test.each([
    ['background', { background: true }],
    ['prompt', { prompt: { id: 'pmpt_1' } }],
    ['max_tool_calls', { max_tool_calls: 3 }],
    ['context_management', { context_management: [{ type: 'compaction' }] }],
    ['moderation', { moderation: { model: 'omni-moderation-latest' } }],
    ['reasoning.summary', { reasoning: { effort: 'low', summary: 'auto' } }],
    ['include.0', { include: ['file_search_call.results'] }],
    ['top_logprobs', { top_logprobs: 2 }],
    ['tools.0.type', { tools: [{ type: 'web_search' }] }],
    ['tools.0.defer_loading', { tools: [{ type: 'function', name: 'f', parameters: {}, strict: true, defer_loading: true }] }],
    ['tool_choice', { tool_choice: 'auto' }],
    ['tool_choice', { tools: [{ type: 'function', name: 'f', parameters: {}, strict: null }], tool_choice: { type: 'function', name: 'g' } }],
    ['text.format.type', { text: { format: { type: 'grammar' } } }],
    ['stream_options.include_obfuscation', { stream_options: { include_obfuscation: true } }],
    ['max_output_tokens', { max_output_tokens: 1001 }],
    ['input', { input: [] }],
    ['input', { input: Array.from({ length: 11 }, () => 'x') }],
    ['messages', { messages: [{ role: 'user', content: 'hi' }] }],
    ['conversation_id', { conversation_id: 'c-1' }],
    // Fields a gateway behind an OpenAI-compatible provider would read as routing: never passed on from here.
    ['fallbacks', { fallbacks: [{ 'gpt-4o': ['gpt-4o-uncleared'] }] }],
    ['user_config', { user_config: { model_list: [] } }],
    ['api_base', { api_base: 'https://attacker.example/v1' }],
    ['chat_template', { chat_template: '{{ messages }}' }],
  ])('%s is refused by name, in the Responses API\'s words', (param, body) => {
    const error = appErrorOf(() => parse(body));
    expect(error.code).toBe('invalid_request');
    expect(error.details?.param).toBe(param);
    expect(error.message).toContain(param);
  });

  test("service_tier: OpenAI's chat tiers are passed on; ultrafast, a Responses-only tier, is refused by name with the reason", () => {
    expect(parse({ service_tier: 'priority' }).options.openAiOnly).toEqual({ service_tier: 'priority' });
    const error = appErrorOf(() => parse({ service_tier: 'ultrafast' }));
    expect(error.details?.param).toBe('service_tier');
    expect(error.message).toContain('ultrafast is not supported');
    expect(paramOf({ service_tier: 'turbo' })).toBe('service_tier');
  });

  test('a client who continues a conversation as on chat completions is pointed at the Responses way', () => {
    expect(appErrorOf(() => parse({ conversation_id: 'c-1' })).message).toContain('conversation (its id) or previous_response_id');
  });
});
