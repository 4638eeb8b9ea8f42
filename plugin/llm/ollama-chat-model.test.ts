import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { REDACTED, startLlmEmulator } from '../../test/emulator/index.ts';
import type { LlmEmulator } from '../../test/emulator/index.ts';
import { CONVERSATION, TEST_API_KEY, collectStream, createTestRequest, describeChatModelContract } from './chat-model-contract.ts';
import type { ChatModelRequest } from './chat-model.ts';
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
  describeChatModelContract({
    wireFormat: 'ollama',
    model: 'llama3.2:3b',
    emulator: () => emulator,
    createModel: ({ baseUrl, timeoutMs }) => createOllamaChatModel({ provider: 'ollama', baseUrl, timeoutMs }),
    readMaxTokens: (body) => readOptions(body).num_predict,
    readTemperature: (body) => readOptions(body).temperature,
  });

  test('puts the sampling fields into options, and a JSON response format into format', async () => {
    const model = createOllamaChatModel({ provider: 'ollama', baseUrl: emulator.url, timeoutMs: 5000 });
    const extra = {
      top_p: 0.9,
      top_k: 40,
      seed: 7,
      stop: 'END',
      presence_penalty: 0.1,
      frequency_penalty: 0.2,
      response_format: { type: 'json_object' },
      user: 'user-7',
      logit_bias: { '1': 2 },
    };
    await collectStream(model.stream(createRequest({ extra, temperature: 0.5 })));

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
});
