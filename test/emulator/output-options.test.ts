import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { Anthropic } from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { exampleOf, startLlmEmulator } from './index.ts';
import type { LlmEmulator } from './index.ts';

let emulator: LlmEmulator;

beforeEach(async () => {
  emulator = await startLlmEmulator();
});

afterEach(async () => {
  await emulator.close();
});

const openai = (): OpenAI => new OpenAI({ apiKey: 'sk-test', baseURL: `${emulator.url}/v1`, maxRetries: 0 });
const SCHEMA = {
  type: 'object',
  properties: { code: { $ref: '#/$defs/code' }, taken: { type: 'string', format: 'date' }, doses: { type: 'array', items: { type: 'number', minimum: 1 }, minItems: 2 } },
  $defs: { code: { type: 'string', enum: ['8867-4', '8480-6'] } },
};

describe('what a request asks of the reply', () => {
  test('a schema gives the same JSON every time, following the schema', () => {
    expect(exampleOf(SCHEMA)).toEqual({ code: '8867-4', taken: '2025-01-01', doses: [1, 1] });
    expect(exampleOf({ anyOf: [{ type: 'boolean' }, { type: 'string' }] })).toBe(true);
  });

  test('OpenAI: json_schema is answered with JSON following it; the record keeps the format, logprobs and effort', async () => {
    const completion = await openai().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'Which code?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'code', schema: SCHEMA, strict: true } },
      logprobs: true,
      top_logprobs: 1,
      reasoning_effort: 'minimal',
      n: 2,
    });
    expect(completion.choices.map((choice) => JSON.parse(choice.message.content ?? ''))).toEqual([exampleOf(SCHEMA), exampleOf(SCHEMA)]);
    expect(completion.choices[0].logprobs?.content?.[0]).toMatchObject({ logprob: -0.1, top_logprobs: [{ logprob: -0.1 }] });
    expect(emulator.received[0].output).toEqual({ responseFormat: { type: 'json_schema', name: 'code', schema: SCHEMA, strict: true }, logprobs: { top: 1 }, reasoningEffort: 'minimal', choices: 2 });
  });

  test.each([
    ['json_object without the word json in the messages', { response_format: { type: 'json_object' } }, "must contain the word 'json'"],
    ['top_logprobs without logprobs', { top_logprobs: 2 }, "'logprobs' must be set to true"],
    ['an unknown reasoning effort', { reasoning_effort: 'huge' }, 'reasoning_effort'],
    ['n streamed', { n: 2, stream: true }, 'does not stream n > 1'],
  ])('OpenAI refuses %s as OpenAI does', async (_name, fields, message) => {
    const body = { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], ...fields } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
    await expect(openai().chat.completions.create(body)).rejects.toMatchObject({ status: 400, message: expect.stringContaining(message) });
    expect(emulator.received).toHaveLength(0);
  });

  test('OpenAI: json_object with json in the messages answers {"echo": ...}; streamed logprobs come per token', async () => {
    const stream = await openai().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'reply in json' }],
      response_format: { type: 'json_object' },
      logprobs: true,
      stream: true,
    });
    let text = '';
    const tokens: string[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      tokens.push(...(chunk.choices[0]?.logprobs?.content ?? []).map((token) => token.token));
    }
    expect(JSON.parse(text)).toEqual({ echo: 'Echo: reply in json' });
    expect(tokens.join('')).toBe(text);
  });

  test("Anthropic: output_config's format is answered with JSON; its effort is checked and recorded", async () => {
    const client = new Anthropic({ apiKey: 'sk-ant', baseURL: emulator.url, maxRetries: 0 });
    const message = await client.messages.create({
      model: 'claude-test',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Which code?' }],
      output_config: { format: { type: 'json_schema', schema: SCHEMA }, effort: 'low' },
    });
    expect(message.content[0]).toMatchObject({ type: 'text', text: JSON.stringify(exampleOf(SCHEMA), null, 1) });
    expect(emulator.received[0].output).toEqual({ responseFormat: { type: 'json_schema', schema: SCHEMA }, reasoningEffort: 'low', choices: 1 });
    await expect(
      client.messages.create({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'x' }], output_config: { effort: 'none' as never } }),
    ).rejects.toMatchObject({ status: 400 });
  });

  test('Ollama: format (a schema, or json), think and logprobs are read; logprobs come back whole and per line', async () => {
    const client = new Ollama({ host: emulator.url });
    const whole = await client.chat({ model: 'llama', messages: [{ role: 'user', content: 'Which code?' }], format: SCHEMA, think: 'high', logprobs: true, top_logprobs: 2, stream: false });
    expect(JSON.parse(whole.message.content)).toEqual(exampleOf(SCHEMA));
    expect(whole.logprobs?.[0]).toMatchObject({ logprob: -0.1, top_logprobs: [{ logprob: -0.1 }, { token: 'alt1', logprob: -1.1 }] });
    expect(emulator.received[0].output).toEqual({ responseFormat: { type: 'json_schema', schema: SCHEMA }, reasoningEffort: 'high', logprobs: { top: 2 }, choices: 1 });

    const parts = await client.chat({ model: 'llama', messages: [{ role: 'user', content: 'a b' }], format: 'json', logprobs: true, stream: true });
    const tokens: string[] = [];
    for await (const part of parts) {
      tokens.push(...(part.logprobs ?? []).map((token) => token.token));
    }
    expect(tokens.join('')).toBe(JSON.stringify({ echo: 'Echo: a b' }, null, 1));
    await expect(client.chat({ model: 'llama', messages: [], think: 'max' as never, stream: false })).rejects.toMatchObject({ status_code: 400 });
  });
});
