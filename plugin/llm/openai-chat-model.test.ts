import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { REDACTED, startLlmEmulator } from '../../test/emulator/index.ts';
import type { LlmEmulator } from '../../test/emulator/index.ts';
import { CONVERSATION, TEST_API_KEY, collectStream, createTestRequest, describeChatModelContract } from './chat-model-contract.ts';
import type { ChatModelContract } from './chat-model-contract.ts';
import { CONVERSATION_WITH_RESULTS, READ_CALL, SEARCH_CALL, TEST_TOOLS, describeToolCallingContract } from './chat-model-tool-contract.ts';
import type { ChatModelRequest } from './chat-model.ts';
import { createOpenAiChatModel } from './openai-chat-model.ts';

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

function createRequest(overrides: Partial<ChatModelRequest> = {}): ChatModelRequest {
  return createTestRequest('gpt-test', overrides);
}

describe('OpenAI', () => {
  const contract: ChatModelContract = {
    wireFormat: 'openai',
    model: 'gpt-test',
    emulator: () => emulator,
    createModel: ({ baseUrl, apiKey, timeoutMs }) =>
      createOpenAiChatModel({ provider: 'openai', kind: 'openai', apiKey, baseUrl: `${baseUrl}/v1`, timeoutMs }),
    readMaxTokens: (body) => body.max_completion_tokens,
    readTemperature: (body) => body.temperature,
    toolCallIds: 'provider',
    takesToolChoice: true,
  };
  describeChatModelContract(contract);
  describeToolCallingContract(contract);

  test('passes the sampling fields on under their OpenAI names, and asks for usage in streams', async () => {
    const model = createOpenAiChatModel({ provider: 'openai', kind: 'openai', apiKey: TEST_API_KEY, baseUrl: `${emulator.url}/v1`, timeoutMs: 5000 });
    const options = { topP: 0.9, stop: ['END'], seed: 42, endUser: { user: 'user-7' }, presencePenalty: 0.5, frequencyPenalty: -0.5, logitBias: { '50256': -100 } };
    await collectStream(model.stream(createRequest({ options })));
    const { body, headers } = emulator.received[0];

    expect(body).toEqual({
      model: 'gpt-test',
      messages: CONVERSATION,
      max_completion_tokens: 100,
      top_p: 0.9,
      stop: ['END'],
      seed: 42,
      user: 'user-7',
      presence_penalty: 0.5,
      frequency_penalty: -0.5,
      logit_bias: { '50256': -100 },
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(headers.authorization).toBe(REDACTED);
  });

  test("sends tools, the tool choice, parallel_tool_calls, calls and results in OpenAI's shape", async () => {
    const model = createOpenAiChatModel({ provider: 'openai', kind: 'openai', apiKey: TEST_API_KEY, baseUrl: `${emulator.url}/v1`, timeoutMs: 5000 });
    await model.complete(
      createRequest({ messages: CONVERSATION_WITH_RESULTS, tools: TEST_TOOLS, toolChoice: { name: 'read_patient' }, options: { parallelToolCalls: false } }),
    );
    const { body } = emulator.received[0];

    expect(body.tools).toEqual(TEST_TOOLS.map((tool) => ({ type: 'function', function: tool })));
    expect(body.tool_choice).toEqual({ type: 'function', function: { name: 'read_patient' } });
    expect(body.parallel_tool_calls).toBe(false);
    expect(body.messages).toEqual([
      ...CONVERSATION,
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_history_0', type: 'function', function: { name: 'search_observations', arguments: '{"code":"8867-4","count":3}' } },
          { id: 'call_history_1', type: 'function', function: { name: 'read_patient', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_history_0', content: 'Heart rate 48 bpm on 2025-03-01.' },
      { role: 'tool', tool_call_id: 'call_history_1', content: 'Jane Doe, born 1990, marathon runner.' },
    ]);
  });

  test("the calls keep the provider's ids, whole and streamed", async () => {
    const model = createOpenAiChatModel({ provider: 'openai', kind: 'openai', apiKey: TEST_API_KEY, baseUrl: `${emulator.url}/v1`, timeoutMs: 5000 });
    emulator.enqueue({ toolCalls: [[SEARCH_CALL, { ...READ_CALL, id: 'call_chosen' }]] });
    const completion = await model.complete(createRequest({ tools: TEST_TOOLS }));
    emulator.enqueue({ toolCalls: [[SEARCH_CALL]] });
    const { events } = await collectStream(model.stream(createRequest({ tools: TEST_TOOLS })));

    expect(completion.toolCalls?.map((call) => call.id)).toEqual(['call_1_0', 'call_chosen']);
    expect(events.filter((event) => event.type === 'tool_call' && event.id !== undefined)).toEqual([
      { type: 'tool_call', index: 0, id: 'call_2_0', name: 'search_observations', arguments: '' },
    ]);
  });
});

describe('Azure OpenAI', () => {
  const contract: ChatModelContract = {
    wireFormat: 'azure',
    model: 'clinical-gpt-deployment',
    emulator: () => emulator,
    createModel: ({ baseUrl, apiKey, timeoutMs }) =>
      createOpenAiChatModel({ provider: 'azure', kind: 'azure-openai', apiKey, baseUrl, apiVersion: '2024-10-21', timeoutMs }),
    readMaxTokens: (body) => body.max_tokens,
    readTemperature: (body) => body.temperature,
    toolCallIds: 'provider',
    takesToolChoice: true,
  };
  describeChatModelContract(contract);
  describeToolCallingContract(contract);

  test('sends the deployment in the path, the api-version and the api-key header', async () => {
    const model = createOpenAiChatModel({
      provider: 'azure',
      kind: 'azure-openai',
      apiKey: TEST_API_KEY,
      baseUrl: `${emulator.url}/`,
      apiVersion: '2024-10-21',
      timeoutMs: 5000,
    });
    await model.complete(createRequest({ model: 'my-deployment' }));
    const [record] = emulator.received;

    expect(record.path).toBe('/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21');
    expect(record.headers['api-key']).toBe(REDACTED);
    expect(record.headers.authorization).toBeUndefined();
  });

  test('an endpoint given with /openai is not doubled', async () => {
    const model = createOpenAiChatModel({
      provider: 'azure',
      kind: 'azure-openai',
      apiKey: TEST_API_KEY,
      baseUrl: `${emulator.url}/openai`,
      apiVersion: '2024-10-21',
      timeoutMs: 5000,
    });
    await model.complete(createRequest({ model: 'my-deployment' }));

    expect(emulator.received[0].path).toMatch(/^\/openai\/deployments\/my-deployment\//);
  });

  test('needs an api version', () => {
    expect(() =>
      createOpenAiChatModel({ provider: 'azure', kind: 'azure-openai', apiKey: TEST_API_KEY, baseUrl: emulator.url, timeoutMs: 5000 }),
    ).toThrow("LLM provider 'azure' (azure-openai) needs apiVersion.");
  });
});

describe('OpenAI-compatible', () => {
  const contract: ChatModelContract = {
    wireFormat: 'openai',
    model: 'meta-llama/Llama-3.1-8B-Instruct',
    emulator: () => emulator,
    createModel: ({ baseUrl, apiKey, timeoutMs }) =>
      createOpenAiChatModel({ provider: 'vllm', kind: 'openai-compatible', apiKey, baseUrl: `${baseUrl}/proxy/vllm/v1`, timeoutMs }),
    readMaxTokens: (body) => body.max_tokens,
    readTemperature: (body) => body.temperature,
    toolCallIds: 'provider',
    takesToolChoice: true,
  };
  describeChatModelContract(contract);
  describeToolCallingContract(contract);

  test('uses the custom base path', async () => {
    const model = createOpenAiChatModel({ provider: 'vllm', kind: 'openai-compatible', apiKey: TEST_API_KEY, baseUrl: `${emulator.url}/proxy/vllm/v1`, timeoutMs: 5000 });
    await model.complete(createRequest());

    expect(emulator.received[0].path).toBe('/proxy/vllm/v1/chat/completions');
  });

  test('a server without a key gets no Authorization header', async () => {
    const model = createOpenAiChatModel({ provider: 'lmstudio', kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, timeoutMs: 5000 });
    const completion = await model.complete(createRequest());

    expect(completion.text).toBe('Echo: And for trained athletes?');
    expect(emulator.received[0].headers.authorization).toBeUndefined();
  });

  test('the token field can be chosen', async () => {
    const model = createOpenAiChatModel({
      provider: 'vllm',
      kind: 'openai-compatible',
      baseUrl: `${emulator.url}/v1`,
      timeoutMs: 5000,
      maxTokensParameter: 'max_completion_tokens',
    });
    await model.complete(createRequest());

    expect(emulator.received[0].body).toMatchObject({ max_completion_tokens: 100 });
    expect(emulator.received[0].body).not.toHaveProperty('max_tokens');
  });

});
