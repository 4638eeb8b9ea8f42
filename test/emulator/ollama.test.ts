import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { Ollama } from 'ollama';
import type { ChatResponse } from 'ollama';
import { startLlmEmulator } from './index.ts';
import type { LlmEmulator } from './index.ts';

let emulator: LlmEmulator;

beforeEach(async () => {
  emulator = await startLlmEmulator();
});

afterEach(async () => {
  await emulator.close();
});

function createClient(): Ollama {
  return new Ollama({ host: emulator.url });
}

async function collectParts(stream: AsyncIterable<ChatResponse>): Promise<ChatResponse[]> {
  const parts: ChatResponse[] = [];
  for await (const part of stream) {
    parts.push(part);
  }
  return parts;
}

describe('Ollama chat', () => {
  test('streams NDJSON parts and a final done part with the eval counts', async () => {
    const stream = await createClient().chat({
      model: 'llama3.2',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'ping me' },
      ],
      stream: true,
    });
    const parts = await collectParts(stream);

    expect(parts.map((part) => part.message.content)).toEqual(['Echo:', ' ping', ' me', '']);
    expect(parts.slice(0, -1).every((part) => !part.done)).toBe(true);
    expect(parts.at(-1)).toMatchObject({ done: true, done_reason: 'stop', prompt_eval_count: 4, eval_count: 3 });
    expect(emulator.received[0]).toMatchObject({ provider: 'ollama', model: 'llama3.2', stream: true });
  });

  test('answers stream: false with one JSON response', async () => {
    const response = await createClient().chat({
      model: 'llama3.2',
      messages: [{ role: 'user', content: 'no stream' }],
      stream: false,
    });

    expect(response).toMatchObject({
      model: 'llama3.2',
      message: { role: 'assistant', content: 'Echo: no stream' },
      done: true,
      done_reason: 'stop',
      prompt_eval_count: 2,
      eval_count: 3,
    });
  });

  test('streams when the body does not say (the Ollama server default)', async () => {
    const response = await fetch(`${emulator.url}/api/chat`, {
      method: 'POST',
      body: JSON.stringify({ model: 'llama3.2', messages: [{ role: 'user', content: 'x' }] }),
    });
    const lines = (await response.text()).trim().split('\n');

    expect(response.headers.get('content-type')).toBe('application/x-ndjson');
    expect(lines).toHaveLength(3);
  });

  test("caps the reply at options.num_predict with done_reason 'length'", async () => {
    const response = await createClient().chat({
      model: 'llama3.2',
      messages: [{ role: 'user', content: 'one two three' }],
      options: { num_predict: 2 },
    });

    expect(response.message.content).toBe('Echo: one');
    expect(response.done_reason).toBe('length');
  });

  test("answers errors as {error}, raised as the SDK's ResponseError with the status", async () => {
    emulator.enqueue({ errorStatus: 404, errorMessage: 'model "nope" not found, try pulling it first' });
    const error = await createClient()
      .chat({ model: 'nope', messages: [] })
      .catch((caught: unknown) => caught);

    expect(error).toMatchObject({
      name: 'ResponseError',
      status_code: 404,
      error: 'model "nope" not found, try pulling it first',
    });
  });

  test('lists models from /api/tags', async () => {
    const list = await createClient().list();

    expect(list.models.map((model) => model.name)).toEqual(['llm-emulator']);
  });
});
