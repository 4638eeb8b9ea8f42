import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { REDACTED, startLlmEmulator } from '../../test/emulator/index.ts';
import type { LlmEmulator } from '../../test/emulator/index.ts';
import { CONVERSATION, TEST_API_KEY, collectStream, createTestRequest, describeChatModelContract } from './chat-model-contract.ts';
import type { ChatModelContract } from './chat-model-contract.ts';
import { CONVERSATION_WITH_RESULTS, READ_CALL, SEARCH_CALL, TEST_TOOLS, describeToolCallingContract } from './chat-model-tool-contract.ts';
import type { ChatMessage, ChatModelRequest } from './chat-model.ts';
import { createOllamaChatModel } from './ollama-chat-model.ts';

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
  return createTestRequest('llama3.2:3b', overrides);
}

function readOptions(body: Record<string, unknown>): Record<string, unknown> {
  const options = body.options;
  return typeof options === 'object' && options !== null ? { ...options } : {};
}

describe('Ollama', () => {
  const contract: ChatModelContract = {
    wireFormat: 'ollama',
    model: 'llama3.2:3b',
    emulator: () => emulator,
    createModel: ({ baseUrl, timeoutMs }) => createOllamaChatModel({ provider: 'ollama', baseUrl, timeoutMs }),
    readMaxTokens: (body) => readOptions(body).num_predict,
    readTemperature: (body) => readOptions(body).temperature,
    toolCallIds: 'adapter',
    takesToolChoice: false,
  };
  describeChatModelContract(contract);
  describeToolCallingContract(contract);

  test('puts the sampling fields into options, and a JSON response format into format', async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 });
    const options = { topP: 0.9, topK: 40, seed: 7, stop: ['END'], presencePenalty: 0.1, frequencyPenalty: 0.2, responseFormat: { type: 'json_object' as const } };
    await collectStream(model.stream(createRequest({ options, temperature: 0.5 })));

    expect(emulator.received[0].body).toEqual({
      model: 'llama3.2:3b',
      messages: CONVERSATION,
      stream: true,
      format: 'json',
      options: {
        num_predict: 100,
        temperature: 0.5,
        top_p: 0.9,
        top_k: 40,
        seed: 7,
        stop: ['END'],
        presence_penalty: 0.1,
        frequency_penalty: 0.2,
      },
    });
  });

  test('complete asks for a whole reply', async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 });
    await model.complete(createRequest());

    expect(emulator.received[0]).toMatchObject({ stream: false, body: { stream: false } });
  });

  test('sends an API key as a bearer token when one is configured, and none otherwise', async () => {
    await createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 }).complete(createRequest());
    await createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, apiKey: TEST_API_KEY, timeoutMs: 5000 }).complete(
      createRequest(),
    );

    expect(emulator.received.map((record) => record.headers.authorization)).toEqual([undefined, REDACTED]);
  });

  test('a base URL with a path prefix (a proxy) is kept', async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: `${emulator.url}/ollama`, timeoutMs: 5000 });
    await model.complete(createRequest());

    expect(emulator.received[0].path).toBe('/ollama/api/chat');
  });

  test('concurrent calls on one client keep their own signals', async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 });
    const controller = new AbortController();
    emulator.enqueue({ hang: true });
    const hanging = model.complete(createRequest({ signal: controller.signal })).catch((error: unknown) => error);
    const answered = await model.complete(createRequest());
    controller.abort();

    expect(answered.text).toBe('Echo: And for trained athletes?');
    expect(await hanging).toMatchObject({ name: 'AbortError' });
  });

  test("sends tools, calls (arguments as objects) and results (named by their call's function) in Ollama's shape", async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 });
    const messages: ChatMessage[] = [
      ...CONVERSATION_WITH_RESULTS,
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_late', name: 'search_observations', arguments: 'not json' }] },
      { role: 'tool', toolCallId: 'call_late', content: 'The arguments are not valid JSON.' },
      { role: 'tool', toolCallId: 'call_unknown', content: 'An answer to no call.' },
    ];
    await model.complete(createRequest({ messages, tools: TEST_TOOLS }));
    const { body } = emulator.received[0];

    expect(body.tools).toEqual(TEST_TOOLS.map((tool) => ({ type: 'function', function: tool })));
    expect(body).not.toHaveProperty('tool_choice');
    expect(body.messages).toEqual([
      ...CONVERSATION,
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { function: { name: 'search_observations', arguments: { code: '8867-4', count: 3 } } },
          { function: { name: 'read_patient', arguments: {} } },
        ],
      },
      { role: 'tool', content: 'Heart rate 48 bpm on 2025-03-01.', tool_name: 'search_observations' },
      { role: 'tool', content: 'Jane Doe, born 1990, marathon runner.', tool_name: 'read_patient' },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'search_observations', arguments: { _unparsed_arguments: 'not json' } } }] },
      { role: 'tool', content: 'The arguments are not valid JSON.', tool_name: 'search_observations' },
      { role: 'tool', content: 'An answer to no call.' },
    ]);
  });

  test("Ollama has no tool choice: 'none' sends no tools (the history's calls still go), 'required' and a name send them", async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 });
    await model.complete(createRequest({ messages: CONVERSATION_WITH_RESULTS, tools: TEST_TOOLS, toolChoice: 'none' }));
    await model.complete(createRequest({ tools: TEST_TOOLS, toolChoice: 'required' }));
    await model.complete(createRequest({ tools: TEST_TOOLS, toolChoice: { name: 'read_patient' } }));
    const [none, required, named] = emulator.received;

    expect(none.body).not.toHaveProperty('tools');
    expect(none.messages[4].toolCalls).toHaveLength(2);
    for (const record of [required, named]) {
      expect(record.tools).toEqual(TEST_TOOLS);
      expect(record.body).not.toHaveProperty('tool_choice');
    }
  });

  test('the adapter gives each call an id of its own, whole and streamed, and finishes with tool_calls', async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 });
    emulator.enqueue({ toolCalls: [[SEARCH_CALL, READ_CALL]] });
    const first = await model.complete(createRequest({ tools: TEST_TOOLS }));
    emulator.enqueue({ toolCalls: [[SEARCH_CALL, READ_CALL]] });
    const second = await model.complete(createRequest({ tools: TEST_TOOLS }));
    emulator.enqueue({ toolCalls: [[SEARCH_CALL, READ_CALL]] });
    const { events } = await collectStream(model.stream(createRequest({ tools: TEST_TOOLS })));
    const ids = [...(first.toolCalls ?? []), ...(second.toolCalls ?? [])].map((call) => call.id);

    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
    expect(ids.every((id) => /^call_[0-9a-f]{24}$/.test(id))).toBe(true);
    // Ollama delivers whole calls: one event each.
    expect(events.filter((event) => event.type === 'tool_call')).toEqual([
      { type: 'tool_call', index: 0, id: expect.stringMatching(/^call_/), name: 'search_observations', arguments: '{"code":"8867-4","count":3}' },
      { type: 'tool_call', index: 1, id: expect.stringMatching(/^call_/), name: 'read_patient', arguments: '{}' },
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'finish', finishReason: 'tool_calls' });
  });
});
