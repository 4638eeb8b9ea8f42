import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { REDACTED, startLlmEmulator } from '../../test/emulator/index.ts';
import type { LlmEmulator } from '../../test/emulator/index.ts';
import { createAnthropicChatModel } from './anthropic-chat-model.ts';
import { CONVERSATION, TEST_API_KEY, collectStream, createTestRequest, describeChatModelContract } from './chat-model-contract.ts';
import type { ChatModel, ChatModelRequest } from './chat-model.ts';

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

function createModel(): ChatModel {
  return createAnthropicChatModel({ provider: 'anthropic', apiKey: TEST_API_KEY, baseUrl: emulator.url, timeoutMs: 5000 });
}

function createRequest(overrides: Partial<ChatModelRequest> = {}): ChatModelRequest {
  return createTestRequest('claude-test', overrides);
}

describe('Anthropic', () => {
  describeChatModelContract({
    wireFormat: 'anthropic',
    model: 'claude-test',
    emulator: () => emulator,
    createModel: ({ baseUrl, apiKey, timeoutMs }) => createAnthropicChatModel({ provider: 'anthropic', apiKey, baseUrl, timeoutMs }),
    readMaxTokens: (body) => body.max_tokens,
    readTemperature: (body) => body.temperature,
  });

  test('sends system messages in the system field and the others as messages', async () => {
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'system' as const, content: 'Cite guidelines.' },
      { role: 'user' as const, content: 'Hello' },
    ];
    await createModel().complete(createRequest({ messages }));
    const { body, headers } = emulator.received[0];

    expect(body.system).toBe('Be brief.\n\nCite guidelines.');
    expect(body.messages).toEqual([{ role: 'user', content: 'Hello' }]);
    // @anthropic-ai/sdk 1.12 sends the key as a bearer token.
    expect(headers.authorization).toBe(REDACTED);
  });

  test('maps stop to stop_sequences and user to metadata.user_id, and drops what Anthropic does not take', async () => {
    const extra = { top_p: 0.8, top_k: 20, stop: ['END', 'STOP'], user: 'user-7', seed: 42, presence_penalty: 1, frequency_penalty: 1, n: 2 };
    await collectStream(createModel().stream(createRequest({ extra, temperature: 0 })));

    expect(emulator.received[0].body).toEqual({
      model: 'claude-test',
      max_tokens: 100,
      system: CONVERSATION[0].content,
      messages: CONVERSATION.slice(1),
      temperature: 0,
      top_p: 0.8,
      top_k: 20,
      stop_sequences: ['END', 'STOP'],
      metadata: { user_id: 'user-7' },
      stream: true,
    });
  });

  test('usage of a stream takes input tokens from message_start and the cumulative output from message_delta', async () => {
    emulator.enqueue({ reply: 'one two three', usage: { promptTokens: 40, completionTokens: 12 } });
    const { events } = await collectStream(createModel().stream(createRequest()));

    // message_start says output_tokens 1; adding it to message_delta's 12 would report 13.
    expect(events.at(-1)).toEqual({ type: 'finish', finishReason: 'stop', usage: { promptTokens: 40, completionTokens: 12 } });
  });

  test('a max_tokens stop reason finishes with length', async () => {
    const completion = await createModel().complete(createRequest({ maxTokens: 1 }));

    expect(completion).toMatchObject({ text: 'Echo:', finishReason: 'length' });
  });

  test('an overloaded error (529) is retryable', async () => {
    emulator.enqueue({ errorStatus: 529 });
    const error = await createModel()
      .complete(createRequest())
      .catch((caught: unknown) => caught);

    expect(error).toMatchObject({
      code: 'upstream_error',
      isRetryable: true,
      details: { upstreamStatus: 529, upstreamType: 'overloaded_error' },
    });
  });
});
