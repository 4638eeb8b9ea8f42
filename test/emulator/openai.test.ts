import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import OpenAI, { AzureOpenAI } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { REDACTED, startLlmEmulator } from './index.ts';
import type { LlmEmulator } from './index.ts';

let emulator: LlmEmulator;

beforeEach(async () => {
  emulator = await startLlmEmulator();
});

afterEach(async () => {
  await emulator.close();
});

// Retries would hide what the emulator answered to the first request.
function createClient(baseURL = `${emulator.url}/v1`): OpenAI {
  return new OpenAI({ apiKey: 'sk-test-secret', baseURL, maxRetries: 0 });
}

async function collectChunks(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
  }
  return chunks;
}

function joinContent(chunks: readonly ChatCompletionChunk[]): string {
  return chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
}

describe('OpenAI chat completions', () => {
  test('answers a non-streamed request with the echo reply and word-count usage', async () => {
    const completion = await createClient().chat.completions.create({
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'What is a FHIR resource?' },
      ],
    });

    expect(completion.object).toBe('chat.completion');
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.model).toBe('gpt-test');
    expect(completion.choices[0].message).toMatchObject({ role: 'assistant', content: 'Echo: What is a FHIR resource?' });
    expect(completion.choices[0].finish_reason).toBe('stop');
    expect(completion.usage).toEqual({ prompt_tokens: 8, completion_tokens: 6, total_tokens: 14 });
  });

  test('streams a role delta, one delta per word, a stop chunk and a usage chunk', async () => {
    const stream = await createClient().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'hello there' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = await collectChunks(stream);

    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0].choices[0].delta).toMatchObject({ role: 'assistant', content: '' });
    expect(chunks.slice(1, 4).map((chunk) => chunk.choices[0].delta.content)).toEqual(['Echo:', ' hello', ' there']);
    expect(chunks[4].choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    expect(chunks[5].choices).toEqual([]);
    expect(chunks[5].usage).toEqual({ prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
    expect(chunks).toHaveLength(6);
    expect(emulator.received[0].outcome).toBe('completed');
    expect(emulator.received[0].tokensSent).toBe(3);
  });

  test('streams without a usage chunk unless include_usage is asked for', async () => {
    const stream = await createClient().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'hello' }],
      stream: true,
    });
    const chunks = await collectChunks(stream);

    expect(joinContent(chunks)).toBe('Echo: hello');
    expect(chunks.at(-1)?.choices[0].finish_reason).toBe('stop');
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
  });

  test("satisfies the SDK's stream accumulator (chat.completions.stream)", async () => {
    const stream = createClient().chat.completions.stream({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'accumulate me' }],
      stream_options: { include_usage: true },
    });
    const completion = await stream.finalChatCompletion();

    expect(completion.choices[0].message.content).toBe('Echo: accumulate me');
    expect(completion.usage?.completion_tokens).toBe(3);
  });

  test("cuts the reply at max_tokens or max_completion_tokens and finishes with 'length'", async () => {
    const client = createClient();
    const messages = [{ role: 'user' as const, content: 'one two three four' }];
    const whole = await client.chat.completions.create({ model: 'gpt-test', messages, max_tokens: 2 });
    const streamed = await collectChunks(
      await client.chat.completions.create({ model: 'gpt-test', messages, max_completion_tokens: 3, stream: true }),
    );

    expect(whole.choices[0]).toMatchObject({ message: { content: 'Echo: one' }, finish_reason: 'length' });
    expect(whole.usage?.completion_tokens).toBe(2);
    expect(joinContent(streamed)).toBe('Echo: one two');
    expect(streamed.at(-1)?.choices[0].finish_reason).toBe('length');
  });

  test('lists models', async () => {
    const page = await createClient().models.list();

    expect(page.data.map((model) => model.id)).toEqual(['llm-emulator']);
  });

  test('answers under a custom base path, as an OpenAI-compatible server', async () => {
    const client = createClient(`${emulator.url}/compat/prefix/v2`);
    const completion = await client.chat.completions.create({
      model: 'local-model',
      messages: [{ role: 'user', content: 'via prefix' }],
    });

    expect(completion.choices[0].message.content).toBe('Echo: via prefix');
    expect(emulator.received[0]).toMatchObject({ provider: 'openai', path: '/compat/prefix/v2/chat/completions' });
  });

  test('rejects a request without messages with a 400 BadRequestError', async () => {
    const client = createClient();
    const request = client.chat.completions.create({ model: 'gpt-test' } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);

    await expect(request).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    expect(emulator.received).toHaveLength(0);
  });
});

describe('Azure OpenAI', () => {
  function createAzureClient(): AzureOpenAI {
    return new AzureOpenAI({
      apiKey: 'azure-test-secret',
      endpoint: emulator.url,
      apiVersion: '2024-10-21',
      deployment: 'gpt-4o-deployment',
      maxRetries: 0,
    });
  }

  test('answers the deployment path, takes the model from it, and redacts api-key', async () => {
    const completion = await createAzureClient().chat.completions.create({
      model: 'ignored-by-azure',
      messages: [{ role: 'user', content: 'hello azure' }],
    });

    expect(completion.choices[0].message.content).toBe('Echo: hello azure');
    expect(emulator.received[0]).toMatchObject({
      provider: 'azure',
      path: '/openai/deployments/gpt-4o-deployment/chat/completions?api-version=2024-10-21',
      model: 'gpt-4o-deployment',
    });
    expect(emulator.received[0].headers['api-key']).toBe(REDACTED);
    expect(JSON.stringify(emulator.received)).not.toContain('azure-test-secret');
  });

  test("streams with Azure's leading prompt-filter chunk that has no choices", async () => {
    const stream = await createAzureClient().chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'stream azure' }],
      stream: true,
    });
    const chunks = await collectChunks(stream);

    expect(chunks[0].choices).toEqual([]);
    expect(chunks[0]).toHaveProperty('prompt_filter_results');
    expect(joinContent(chunks)).toBe('Echo: stream azure');
    expect(chunks.at(-1)?.choices[0].finish_reason).toBe('stop');
  });

  test('answers 404 when the api-version query parameter is missing', async () => {
    const response = await fetch(`${emulator.url}/openai/deployments/d/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ messages: [] }),
    });

    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { message: expect.stringContaining('api-version') } });
  });
});
