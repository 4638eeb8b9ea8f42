import { afterEach, beforeEach, describe, expect, jest, test } from '@jest/globals';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { startLlmEmulator } from './index.ts';
import type { LlmEmulator, ReceivedRequest } from './index.ts';

let emulator: LlmEmulator;

beforeEach(async () => {
  emulator = await startLlmEmulator();
});

afterEach(async () => {
  await emulator.close();
});

// Logging off: the SDKs log the unparseable chunk of the malformed tests at error level.
function createOpenAi(): OpenAI {
  return new OpenAI({ apiKey: 'sk-test', baseURL: `${emulator.url}/v1`, maxRetries: 0, logLevel: 'off' });
}

function createAnthropic(): Anthropic {
  return new Anthropic({ apiKey: 'sk-ant-test', baseURL: emulator.url, maxRetries: 0, logLevel: 'off' });
}

const userMessage = [{ role: 'user' as const, content: 'tell me something' }];

async function streamOpenAiText(options: { signal?: AbortSignal } = {}): Promise<string> {
  const stream = await createOpenAi().chat.completions.create(
    { model: 'gpt-test', messages: userMessage, stream: true },
    { signal: options.signal },
  );
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
  }
  return text;
}

async function waitForOutcome(predicate: (record: ReceivedRequest) => boolean): Promise<ReceivedRequest> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const record = emulator.received[0];
    if (record && predicate(record)) {
      return record;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no matching outcome; received: ${JSON.stringify(emulator.received)}`);
}

describe('reply knobs', () => {
  test('reply replaces the echo, and usage overrides the reported numbers only', async () => {
    emulator.setBehaviour({ reply: 'Fixed answer here.', usage: { promptTokens: 1000, completionTokens: 7 } });
    const completion = await createOpenAi().chat.completions.create({ model: 'gpt-test', messages: userMessage });

    expect(completion.choices[0].message.content).toBe('Fixed answer here.');
    expect(completion.usage).toEqual({ prompt_tokens: 1000, completion_tokens: 7, total_tokens: 1007 });
  });

  test('replyTokens gives a numbered reply of exactly that many tokens', async () => {
    emulator.setBehaviour({ replyTokens: 100 });
    const text = await streamOpenAiText();
    const words = text.split(' ');

    expect(words).toHaveLength(100);
    expect(words[0]).toBe('token1');
    expect(words[99]).toBe('token100');
    expect(emulator.received[0].tokensSent).toBe(100);
  });
});

describe('timing knobs', () => {
  test('latencyMs delays the first byte', async () => {
    emulator.setBehaviour({ latencyMs: 150 });
    const startedAt = performance.now();
    const response = await fetch(`${emulator.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm', messages: userMessage }),
    });
    const elapsed = performance.now() - startedAt;

    expect(response.status).toBe(200);
    expect(elapsed).toBeGreaterThanOrEqual(140);
  });

  test('tokensPerSecond paces streamed tokens', async () => {
    emulator.setBehaviour({ replyTokens: 6, tokensPerSecond: 50 });
    const startedAt = performance.now();
    const text = await streamOpenAiText();
    const elapsed = performance.now() - startedAt;

    // The first token goes at once, the sixth 5 × 20 ms later.
    expect(text.split(' ')).toHaveLength(6);
    expect(elapsed).toBeGreaterThanOrEqual(95);
  });

  test('tokensPerSecond makes a non-streamed reply take as long as streaming it', async () => {
    emulator.setBehaviour({ replyTokens: 5, tokensPerSecond: 50 });
    const startedAt = performance.now();
    await createOpenAi().chat.completions.create({ model: 'gpt-test', messages: userMessage });

    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(95);
  });
});

describe('error knobs', () => {
  test('errorStatus raises the openai typed error with status, type, code and Retry-After', async () => {
    emulator.setBehaviour({ errorStatus: 429, errorMessage: 'Slow down', retryAfterSeconds: 7 });
    const error = await createOpenAi()
      .chat.completions.create({ model: 'gpt-test', messages: userMessage })
      .catch((caught: unknown) => caught);

    if (!(error instanceof OpenAI.RateLimitError)) {
      throw new Error(`expected a RateLimitError, got ${String(error)}`);
    }
    expect(error).toMatchObject({ status: 429, type: 'requests', code: 'rate_limit_exceeded', message: '429 Slow down' });
    expect(error.headers.get('retry-after')).toBe('7');
    expect(emulator.received[0].outcome).toBe('errored');
  });

  test('errorStatus 5xx raises InternalServerError, also for a streamed request', async () => {
    emulator.setBehaviour({ errorStatus: 503 });

    await expect(streamOpenAiText()).rejects.toMatchObject({ status: 503 });
    await expect(streamOpenAiText()).rejects.toBeInstanceOf(OpenAI.InternalServerError);
  });

  test('streamErrorAfterTokens sends an in-band error event that each SDK raises', async () => {
    emulator.setBehaviour({ reply: 'one two three four', streamErrorAfterTokens: 2, errorMessage: 'upstream fell over' });

    await expect(streamOpenAiText()).rejects.toMatchObject({ message: 'upstream fell over' });
    const anthropicStream = createAnthropic().messages.stream({ model: 'c', max_tokens: 50, messages: userMessage });
    await expect(anthropicStream.finalMessage()).rejects.toMatchObject({
      error: { type: 'error', error: { type: 'overloaded_error', message: 'upstream fell over' } },
    });
    const ollamaStream = await new Ollama({ host: emulator.url }).chat({ model: 'l', messages: userMessage, stream: true });
    await expect(drain(ollamaStream)).rejects.toThrow('upstream fell over');
    expect(emulator.received.map((record) => [record.outcome, record.tokensSent])).toEqual([
      ['errored', 2],
      ['errored', 2],
      ['errored', 2],
    ]);
  });
});

async function drain(stream: AsyncIterable<unknown>): Promise<number> {
  let count = 0;
  for await (const _part of stream) {
    count++;
  }
  return count;
}

describe('behaviour written into the message', () => {
  test("a request's last user message can carry its behaviour, for every try of it, leaving the queue alone", async () => {
    emulator.enqueue({ reply: 'from the queue' });
    const content = 'Hello [emulator-behaviour {"errorStatus":503}]';
    for (let attempt = 0; attempt < 2; attempt++) {
      const failure = await createOpenAi()
        .chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content }] })
        .catch((error: unknown) => error);
      expect(failure).toMatchObject({ status: 503 });
    }
    const answered = await createOpenAi().chat.completions.create({ model: 'gpt-test', messages: userMessage });
    expect(answered.choices[0]?.message.content).toBe('from the queue');
  });

  test('a bad behaviour in the message is a 400 naming it', async () => {
    const failure = await createOpenAi()
      .chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: '[emulator-behaviour {"errorStatus":"x"}]' }] })
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ status: 400 });
    expect(String((failure as Error).message)).toContain('Invalid [emulator-behaviour] in the message');
  });
});

describe('cutAfterTokens', () => {
  test('openai: the stream rejects with the transport error after the tokens sent', async () => {
    emulator.setBehaviour({ reply: 'one two three four five', cutAfterTokens: 2 });
    const stream = await createOpenAi().chat.completions.create({ model: 'gpt-test', messages: userMessage, stream: true });
    const received: string[] = [];
    const error = await (async () => {
      for await (const chunk of stream) {
        received.push(chunk.choices[0]?.delta.content ?? '');
      }
    })().catch((caught: unknown) => caught);

    // undici reports the truncated chunked body as TypeError('terminated'), and the SDK passes it through
    // untyped (not an APIConnectionError). Compared by name: it comes from Node's realm, not Jest's.
    expect(error).toMatchObject({ name: 'TypeError', message: 'terminated' });
    expect(received.join('')).toBe('one two');
    expect(await waitForOutcome((record) => record.outcome === 'cut')).toMatchObject({ tokensSent: 2 });
  });

  test('anthropic: messages.stream rejects instead of producing a final message', async () => {
    emulator.setBehaviour({ reply: 'one two three', cutAfterTokens: 1 });
    const stream = createAnthropic().messages.stream({ model: 'c', max_tokens: 50, messages: userMessage });
    const texts: string[] = [];
    stream.on('text', (text) => texts.push(text));
    stream.on('error', () => undefined);

    // MessageStream wraps the transport error in an AnthropicError whose message is the original's.
    const error = await stream.finalMessage().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(Anthropic.AnthropicError);
    expect(error).toMatchObject({ message: 'TypeError: terminated' });
    expect(texts).toEqual(['one']);
  });

  test('ollama: the stream iterator rejects', async () => {
    emulator.setBehaviour({ reply: 'one two three', cutAfterTokens: 2 });
    const stream = await new Ollama({ host: emulator.url }).chat({ model: 'l', messages: userMessage, stream: true });

    await expect(drain(stream)).rejects.toMatchObject({ message: 'terminated' });
  });

  test('a non-streamed reply is cut mid-body: reading the body raises the transport error', async () => {
    emulator.setBehaviour({ cutAfterTokens: 0 });
    const error = await createOpenAi()
      .chat.completions.create({ model: 'gpt-test', messages: userMessage })
      .catch((caught: unknown) => caught);

    expect(error).toMatchObject({ name: 'TypeError', message: 'terminated' });
    expect(emulator.received[0].outcome).toBe('cut');
  });
});

describe('hang and client aborts', () => {
  test('hang never answers; the client abort is recorded as aborted', async () => {
    emulator.setBehaviour({ hang: true });
    const controller = new AbortController();
    const request = createOpenAi().chat.completions.create(
      { model: 'gpt-test', messages: userMessage },
      { signal: controller.signal },
    );
    await waitForOutcome((record) => record.outcome === 'pending');
    controller.abort();

    await expect(request).rejects.toBeInstanceOf(OpenAI.APIUserAbortError);
    expect(await waitForOutcome((record) => record.outcome !== 'pending')).toMatchObject({ outcome: 'aborted', tokensSent: 0 });
  });

  test('a client that stops reading mid-stream is recorded as aborted, with the tokens sent so far', async () => {
    emulator.setBehaviour({ replyTokens: 50, tokensPerSecond: 100 });
    const stream = await createOpenAi().chat.completions.create({ model: 'gpt-test', messages: userMessage, stream: true });
    let contentChunks = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) {
        contentChunks++;
      }
      if (contentChunks === 3) {
        break;
      }
    }

    const record = await waitForOutcome((candidate) => candidate.outcome !== 'pending');
    expect(record.outcome).toBe('aborted');
    expect(record.tokensSent).toBeGreaterThanOrEqual(3);
    expect(record.tokensSent).toBeLessThan(50);
    expect(emulator.totals).toMatchObject({ requests: 1, aborted: 1 });
  });

  test('close() ends hanging requests', async () => {
    emulator.setBehaviour({ hang: true });
    const request = fetch(`${emulator.url}/api/chat`, { method: 'POST', body: JSON.stringify({ model: 'l' }) }).catch(
      (caught: unknown) => caught,
    );
    await waitForOutcome((record) => record.outcome === 'pending');
    await emulator.close();

    expect(emulator.received[0].outcome).toBe('aborted');
    expect(await request).toMatchObject({ name: 'TypeError', message: 'fetch failed' });
  });
});

describe('malformed', () => {
  test('openai: the SDK raises a SyntaxError on the invalid chunk', async () => {
    emulator.setBehaviour({ reply: 'one two three four', malformed: true });

    await expect(streamOpenAiText()).rejects.toBeInstanceOf(SyntaxError);
  });

  test('anthropic: the SDK raises a SyntaxError on the invalid event', async () => {
    emulator.setBehaviour({ reply: 'one two three four', malformed: true });
    const stream = await createAnthropic().messages.create({ model: 'c', max_tokens: 50, messages: userMessage, stream: true });

    await expect(drain(stream)).rejects.toBeInstanceOf(SyntaxError);
  });

  test('ollama: the SDK only warns, skips the line and finishes normally', async () => {
    emulator.setBehaviour({ reply: 'one two three four', malformed: true });
    const warned = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const stream = await new Ollama({ host: emulator.url }).chat({ model: 'l', messages: userMessage, stream: true });
    let text = '';
    for await (const part of stream) {
      text += part.message.content;
    }

    expect(text).toBe('one two three four');
    expect(warned).toHaveBeenCalledWith('invalid json: ', expect.any(String));
    warned.mockRestore();
  });

  test('a non-streamed reply is an invalid JSON body', async () => {
    emulator.setBehaviour({ malformed: true });

    await expect(createOpenAi().chat.completions.create({ model: 'gpt-test', messages: userMessage })).rejects.toBeInstanceOf(
      SyntaxError,
    );
  });
});
