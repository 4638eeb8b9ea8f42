import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import Anthropic from '@anthropic-ai/sdk';
import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages';
import { REDACTED, startLlmEmulator } from './index.ts';
import type { LlmEmulator } from './index.ts';

let emulator: LlmEmulator;

beforeEach(async () => {
  emulator = await startLlmEmulator();
});

afterEach(async () => {
  await emulator.close();
});

function createClient(): Anthropic {
  return new Anthropic({ apiKey: 'sk-ant-test-secret', baseURL: emulator.url, maxRetries: 0 });
}

describe('Anthropic Messages', () => {
  test('answers a non-streamed request, counting the top-level system prompt', async () => {
    const message = await createClient().messages.create({
      model: 'claude-test',
      max_tokens: 100,
      system: 'Answer briefly.',
      messages: [{ role: 'user', content: 'Define Observation' }],
    });

    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content: [{ type: 'text', text: 'Echo: Define Observation' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 4, output_tokens: 3 },
    });
    expect(message.id).toMatch(/^msg_/);
    expect(emulator.received[0].messages).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Define Observation' },
    ]);
    // This SDK version sends the API key as `Authorization: Bearer`, not `x-api-key`; both are redacted.
    expect(emulator.received[0].headers.authorization).toBe(REDACTED);
    expect(emulator.received[0].headers['anthropic-version']).toEqual(expect.any(String));
    expect(JSON.stringify(emulator.received)).not.toContain('sk-ant-test-secret');
  });

  test('streams through client.messages.stream into a final message', async () => {
    const stream = createClient().messages.stream({
      model: 'claude-test',
      max_tokens: 100,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'stream this please' }] }],
    });
    const texts: string[] = [];
    stream.on('text', (text) => texts.push(text));
    const message = await stream.finalMessage();

    expect(texts).toEqual(['Echo:', ' stream', ' this', ' please']);
    expect(message.content).toMatchObject([{ type: 'text', text: 'Echo: stream this please' }]);
    expect(message.stop_reason).toBe('end_turn');
    expect(message.usage).toMatchObject({ input_tokens: 3, output_tokens: 4 });
  });

  test('sends the events in the order of the Messages streaming protocol', async () => {
    const stream = await createClient().messages.create({
      model: 'claude-test',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const events: RawMessageStreamEvent[] = [];
    for await (const event of stream) {
      events.push(event);
    }

    // ping is part of the wire stream, but the SDK drops it before it reaches the caller.
    expect(events.map((event) => event.type)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(events[5]).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 2 } });
  });

  test("cuts the reply at max_tokens with stop_reason 'max_tokens'", async () => {
    const message = await createClient().messages.create({
      model: 'claude-test',
      max_tokens: 2,
      messages: [{ role: 'user', content: 'a long question here' }],
    });

    expect(message.content).toEqual([{ type: 'text', text: 'Echo: a' }]);
    expect(message.stop_reason).toBe('max_tokens');
  });

  test("answers errors in Anthropic's shape, raised as the SDK's typed error", async () => {
    emulator.enqueue({ errorStatus: 529, errorMessage: 'Overloaded' });
    const request = createClient().messages.create({
      model: 'claude-test',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    });

    const error = await request.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect(error).toMatchObject({
      status: 529,
      error: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
    });
  });

  test('rejects a request without max_tokens, as Anthropic does', async () => {
    const response = await fetch(`${emulator.url}/v1/messages`, {
      method: 'POST',
      body: JSON.stringify({ model: 'claude-test', messages: [{ role: 'user', content: 'hi' }] }),
    });

    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
  });

  test("lists models in Anthropic's shape", async () => {
    const page = await createClient().models.list();

    expect(page.data.map((model) => model.id)).toEqual(['llm-emulator']);
  });
});
