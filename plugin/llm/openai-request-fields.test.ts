import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { createStructuredReplyText, splitIntoTokens, startLlmEmulator, type LlmEmulator } from '../../test/emulator/index.ts';
import { appErrorOf } from '../../test/support/app-error.ts';
import { TEST_API_KEY, collectStream, createTestRequest, expectedLogprobs } from './chat-model-contract.ts';
import type { ChatModelRequest } from './chat-model.ts';
import { createOpenAiChatModel, type OpenAiProviderKind } from './openai-chat-model.ts';

let emulator: LlmEmulator;

beforeAll(async () => {
  emulator = await startLlmEmulator();
});

afterEach(() => {
  emulator.reset();
});

afterAll(async () => {
  await emulator.close();
});

function createModel(kind: OpenAiProviderKind = 'openai') {
  return createOpenAiChatModel({ provider: kind, kind, apiKey: TEST_API_KEY, baseUrl: `${emulator.url}/v1`, timeoutMs: 5000 });
}

const SCHEMA = { type: 'object', properties: { systolic: { type: 'integer', minimum: 60 }, note: { type: 'string' } }, required: ['systolic', 'note'] };

const REQUEST: Partial<ChatModelRequest> = {
  messages: [
    { role: 'developer', content: 'Answer as JSON.', name: 'clinic-app' },
    { role: 'user', content: 'hithere', parts: ['hi', 'there'] },
  ],
  tools: [{ name: 'read_vitals', parameters: { type: 'object', properties: {} }, strict: true }],
  options: {
    responseFormat: { type: 'json_schema', name: 'vitals', schema: SCHEMA, strict: true },
    logprobs: { top: 2 },
    reasoningEffort: 'low',
    endUser: { user: 'u-1', safetyIdentifier: 's-1' },
    store: true,
    metadata: { ward: '7' },
    openAiOnly: { service_tier: 'flex', verbosity: 'low', prompt_cache_key: 'k' },
  },
};

describe('OpenAI-style providers and the request fields', () => {
  test('OpenAI receives every field under its own name: developer messages, text parts, strict tools, json_schema, logprobs, effort, store and metadata', async () => {
    await createModel().complete(createTestRequest('gpt-test', REQUEST));
    const { body, output, tools } = emulator.received[0];

    expect(body.messages).toEqual([
      { role: 'developer', content: 'Answer as JSON.', name: 'clinic-app' },
      { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'text', text: 'there' }] },
    ]);
    expect(tools).toEqual([{ name: 'read_vitals', parameters: { type: 'object', properties: {} }, strict: true }]);
    expect(body).toMatchObject({
      response_format: { type: 'json_schema', json_schema: { name: 'vitals', schema: SCHEMA, strict: true } },
      logprobs: true,
      top_logprobs: 2,
      reasoning_effort: 'low',
      user: 'u-1',
      safety_identifier: 's-1',
      store: true,
      metadata: { ward: '7' },
      service_tier: 'flex',
      verbosity: 'low',
      prompt_cache_key: 'k',
    });
    expect(output).toEqual({ responseFormat: { type: 'json_schema', name: 'vitals', schema: SCHEMA, strict: true }, logprobs: { top: 2 }, reasoningEffort: 'low', choices: 1 });
  });

  test('metadata without store stays on the record: OpenAI refuses it', async () => {
    await createModel().complete(createTestRequest('gpt-test', { options: { metadata: { ward: '7' } } }));
    expect(emulator.received[0].body).not.toHaveProperty('metadata');
  });

  test('an OpenAI-compatible server gets developer messages as system messages, and top_k', async () => {
    await createModel('openai-compatible').complete(createTestRequest('local', { messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'hi' }], options: { topK: 5 } }));
    const { body } = emulator.received[0];
    expect(body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
    ]);
    expect(body.top_k).toBe(5);
  });

  test('OpenAI and Azure refuse top_k by name before any call', () => {
    for (const kind of ['openai', 'azure-openai'] as const) {
      const model = createOpenAiChatModel({ provider: kind, kind, apiKey: TEST_API_KEY, baseUrl: emulator.url, apiVersion: '2024-10-21', timeoutMs: 5000 });
      expect(appErrorOf(() => model.checkRequest?.({ messages: [], maxTokens: 1, options: { topK: 5 } }))).toMatchObject({ status: 400, details: { param: 'top_k' } });
    }
    expect(emulator.received).toHaveLength(0);
  });

  test("an OpenAI-compatible server receives a schema beside json_object as sent (instructor's JSON_SCHEMA mode), whole and streamed, and answers it", async () => {
    const model = createModel('openai-compatible');
    const request = createTestRequest('local', { messages: [{ role: 'user', content: 'Vitals as json?' }], options: { responseFormat: { type: 'json_object', schema: SCHEMA } } });
    model.checkRequest?.(request);
    const completion = await model.complete(request);
    await collectStream(model.stream(request));

    for (const { body } of emulator.received) {
      expect(body.response_format).toEqual({ type: 'json_object', schema: SCHEMA });
    }
    expect(JSON.parse(completion.text)).toEqual({ systolic: 60, note: 'note' });
  });

  test('OpenAI and Azure refuse a schema beside json_object by name before any call, and never send it', async () => {
    const options = { responseFormat: { type: 'json_object' as const, schema: SCHEMA } };
    for (const kind of ['openai', 'azure-openai'] as const) {
      const model = createOpenAiChatModel({ provider: kind, kind, apiKey: TEST_API_KEY, baseUrl: emulator.url, apiVersion: '2024-10-21', timeoutMs: 5000 });
      const error = appErrorOf(() => model.checkRequest?.({ messages: [], maxTokens: 1, options }));
      expect(error).toMatchObject({ status: 400, details: { param: 'response_format.schema' } });
      expect(error.message).toContain('json_schema');
    }
    expect(emulator.received).toHaveLength(0);
    // A path that skipped the check still sends OpenAI only what OpenAI takes.
    await createModel('openai').complete(createTestRequest('gpt-test', { messages: [{ role: 'user', content: 'json?' }], options }));
    expect(emulator.received[0].body.response_format).toEqual({ type: 'json_object' });
  });

  test("an OpenAI-compatible server receives the fields its operator lists, as sent, whole and streamed; none overrides one of fhirgate's", async () => {
    const vendorFields = { min_p: 0.05, repetition_penalty: 1.1, guided_json: { type: 'object', properties: { a: { type: 'string' } } }, max_tokens: 99999 };
    const model = createOpenAiChatModel({ provider: 'local', kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, timeoutMs: 5000, passThroughFields: Object.keys(vendorFields) });
    const request = createTestRequest('local', { maxTokens: 50, options: { vendorFields } });
    model.checkRequest?.(request);
    await model.complete(request);
    await collectStream(model.stream(request));

    for (const { body } of emulator.received) {
      expect(body).toMatchObject({ min_p: 0.05, repetition_penalty: 1.1, guided_json: vendorFields.guided_json, max_tokens: 50 });
    }
    expect(emulator.received).toHaveLength(2);
  });

  test.each([
    ['fallbacks', { fallbacks: [{ 'gpt-4o': ['gpt-4o-uncleared'] }] }],
    ['mock_testing_fallbacks', { mock_testing_fallbacks: true }],
    ['user_config', { user_config: { model_list: [{ model_name: 'gpt-4o', litellm_params: { model: 'openai/x', api_base: 'https://attacker.example' } }] } }],
    ['api_base', { api_base: 'https://attacker.example/v1' }],
    ['chat_template', { chat_template: '{{ messages }}' }],
  ])("an OpenAI-compatible provider refuses %s by name by default: a gateway behind it would read it as routing", (param, vendorFields) => {
    const error = appErrorOf(() => createModel('openai-compatible').checkRequest?.({ messages: [], maxTokens: 1, options: { vendorFields } }));
    expect(error).toMatchObject({ status: 400, code: 'invalid_request', details: { param } });
    expect(error.message).toContain('passThroughFields');
  });

  test('a field the operator did not list is refused even when another is listed; the listed one goes to OpenAI too', async () => {
    const listed = createOpenAiChatModel({ provider: 'litellm', kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, timeoutMs: 5000, passThroughFields: ['min_p'] });
    const error = appErrorOf(() => listed.checkRequest?.({ messages: [], maxTokens: 1, options: { vendorFields: { min_p: 0.1, api_base: 'https://attacker.example' } } }));
    expect(error).toMatchObject({ status: 400, details: { param: 'api_base' } });

    const openai = createOpenAiChatModel({ provider: 'openai', kind: 'openai', apiKey: TEST_API_KEY, baseUrl: `${emulator.url}/v1`, timeoutMs: 5000, passThroughFields: ['new_openai_field'] });
    const request = createTestRequest('gpt-test', { options: { vendorFields: { new_openai_field: 'x' } } });
    openai.checkRequest?.(request);
    await openai.complete(request);
    expect(emulator.received[0].body).toMatchObject({ new_openai_field: 'x' });
  });

  test('a field not listed never reaches the provider, even on a path that skipped the check', async () => {
    await createModel('openai-compatible').complete(createTestRequest('local', { options: { vendorFields: { api_base: 'https://attacker.example/v1' } } }));
    expect(emulator.received[0].body).not.toHaveProperty('api_base');
  });

  test('OpenAI and Azure refuse a field fhirgate does not know by name before any call', () => {
    for (const kind of ['openai', 'azure-openai'] as const) {
      const model = createOpenAiChatModel({ provider: kind, kind, apiKey: TEST_API_KEY, baseUrl: emulator.url, apiVersion: '2024-10-21', timeoutMs: 5000 });
      const error = appErrorOf(() => model.checkRequest?.({ messages: [], maxTokens: 1, options: { vendorFields: { min_p: 0.05 } } }));
      expect(error).toMatchObject({ status: 400, details: { param: 'min_p' } });
      expect(error.message).toContain('passThroughFields');
    }
  });

  test('the structured reply and its log probabilities come back, whole and streamed', async () => {
    const request = createTestRequest('gpt-test', { messages: [{ role: 'user', content: 'vitals?' }], options: REQUEST.options });
    const text = createStructuredReplyText({ messages: [], output: { responseFormat: { type: 'json_schema', schema: SCHEMA }, choices: 1 } });
    expect(JSON.parse(text)).toEqual({ systolic: 60, note: 'note' });
    const expected = expectedLogprobs(splitIntoTokens(text), 2);

    const completion = await createModel().complete(request);
    expect(completion.text).toBe(text);
    expect(completion.logprobs).toEqual(expected);

    const { events } = await collectStream(createModel().stream(request));
    const texts = events.filter((event) => event.type === 'text');
    expect(texts.map((event) => event.text).join('')).toBe(text);
    expect(texts.flatMap((event) => event.logprobs ?? [])).toEqual(expected);
  });
});
