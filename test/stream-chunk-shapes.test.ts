/**
 * fhirgate's streamed chunks, field for field against OpenAI's own (`fixtures/openai-chat-stream-chunks.json`): every
 * kind of chunk a stream holds (the opening, content, content with log probabilities, an opening that carries a
 * call, a call's arguments, the next call, the finish, the usage chunk), read raw off the standalone host's socket,
 * with and without `stream_options.include_usage`. The only differences are the ones docs/api.md names: fhirgate's
 * own `conversation_id` and `communication_id`, and OpenAI's fields about its own service that fhirgate does not
 * send.
 */
import { readFile } from 'node:fs/promises';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

/** OpenAI's fields about its own service: which tier ran the request, its backend's fingerprint, the padding of a chunk. */
const OPENAI_SERVICE_FIELDS = ['service_tier', 'system_fingerprint', 'obfuscation'];
/** fhirgate's port reports prompt and completion tokens only: no cached, audio or reasoning details. */
const OPENAI_USAGE_DETAILS = ['prompt_tokens_details', 'completion_tokens_details'];
/** fhirgate's own fields: the conversation on every chunk, the reply's record on the last. */
const FHIRGATE_FIELDS = ['conversation_id', 'communication_id'];

type ChunkKind = 'opening' | 'content' | 'content_with_logprobs' | 'opening_with_call' | 'call_arguments' | 'next_call' | 'finish' | 'usage';
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Chunk = { [key: string]: Json };

/** The shape of a JSON value: each value's type in its place, an array as the shape of its first item. */
function shapeOf(value: Json): unknown {
  if (value === null) {
    return 'null';
  }
  if (Array.isArray(value)) {
    return value.length === 0 ? [] : [shapeOf(value[0])];
  }
  if (typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, shapeOf(value[key])]));
  }
  return typeof value;
}

/** A chunk without the fields docs/api.md names as the differences. */
function comparable(chunk: Chunk): Json {
  const rest: Chunk = Object.fromEntries(Object.entries(chunk).filter(([key]) => !OPENAI_SERVICE_FIELDS.includes(key) && !FHIRGATE_FIELDS.includes(key)));
  const usage = rest.usage;
  if (usage !== null && typeof usage === 'object' && !Array.isArray(usage)) {
    rest.usage = Object.fromEntries(Object.entries(usage).filter(([key]) => !OPENAI_USAGE_DETAILS.includes(key)));
  }
  return rest;
}

function kindOf(chunk: Chunk): ChunkKind {
  const choices = chunk.choices as Chunk[];
  if (choices.length === 0) {
    return 'usage';
  }
  const [choice] = choices;
  const delta = choice.delta as Chunk;
  if (choice.finish_reason !== null) {
    return 'finish';
  }
  if ('role' in delta) {
    return 'tool_calls' in delta ? 'opening_with_call' : 'opening';
  }
  if ('tool_calls' in delta) {
    return 'id' in (delta.tool_calls as Chunk[])[0] ? 'next_call' : 'call_arguments';
  }
  return choice.logprobs === null ? 'content' : 'content_with_logprobs';
}

/** OpenAI's chunk of a kind, as sent without `include_usage`: no `usage` field. */
function withoutUsage(chunk: Chunk): Chunk {
  return Object.fromEntries(Object.entries(chunk).filter(([key]) => key !== 'usage'));
}

describe("fhirgate's stream chunks have the shapes of OpenAI's", () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let openAiChunks: Record<ChunkKind, Chunk>;
  let headers: Record<string, string>;

  beforeAll(async () => {
    openAiChunks = JSON.parse(await readFile(new URL('../fixtures/openai-chat-stream-chunks.json', import.meta.url), 'utf8')).chunks;
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: {
            openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'] },
            anthropic: { kind: 'anthropic', apiKey: 'sk-ant-test', baseUrl: emulator.url, models: ['claude-haiku-4-5'] },
          },
          defaultModel: 'openai/gpt-4o-mini',
        },
      },
    });
    const project = await host.seedProject();
    headers = {
      Authorization: `Bearer ${await host.accessTokenFor(project.ids['practitioner-membership'])}`,
      'X-Project-ID': project.projectId,
      'Content-Type': 'application/json',
    };
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  /** The JSON chunks of one streamed request, as they came off the socket, and whether it ended with `[DONE]`. */
  async function streamChunks(body: Record<string, unknown>, extraHeaders: Record<string, string> = {}): Promise<{ chunks: Chunk[]; done: boolean }> {
    const response = await fetch(`${host.url}v1/chat/completions`, { method: 'POST', headers: { ...headers, ...extraHeaders }, body: JSON.stringify({ stream: true, ...body }) });
    expect(response.status).toBe(200);
    const data = (await response.text())
      .split('\n\n')
      .filter((event) => event.startsWith('data: '))
      .map((event) => event.slice('data: '.length));
    return { chunks: data.filter((line) => line !== '[DONE]').map((line) => JSON.parse(line) as Chunk), done: data.at(-1) === '[DONE]' };
  }

  function expectOpenAiShapes(chunks: readonly Chunk[], includeUsage: boolean): ChunkKind[] {
    const kinds = chunks.map(kindOf);
    for (const [index, chunk] of chunks.entries()) {
      const reference = includeUsage ? openAiChunks[kinds[index]] : withoutUsage(openAiChunks[kinds[index]]);
      expect({ kind: kinds[index], shape: shapeOf(comparable(chunk)) }).toEqual({ kind: kinds[index], shape: shapeOf(comparable(reference)) });
    }
    return kinds;
  }

  const weatherTools = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
    { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
  ];
  const twoCalls = { toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' } }, { name: 'get_time', arguments: {} }]] };

  test.each([
    ['with include_usage: usage null on every chunk, then the usage chunk', true],
    ['without include_usage: no usage field at all', false],
  ])('text, %s', async (_name, includeUsage) => {
    const { chunks, done } = await streamChunks({ messages: [{ role: 'user', content: 'two words' }], ...(includeUsage ? { stream_options: { include_usage: true } } : {}) });

    const kinds = expectOpenAiShapes(chunks, includeUsage);
    expect(kinds).toEqual(['opening', 'content', 'content', 'content', 'finish', ...(includeUsage ? ['usage'] : [])]);
    expect(chunks.every((chunk) => ('usage' in chunk) === includeUsage)).toBe(true);
    expect(done).toBe(true);
  });

  test('text with log probabilities', async () => {
    const { chunks } = await streamChunks({ messages: [{ role: 'user', content: 'two words' }], logprobs: true, top_logprobs: 1, stream_options: { include_usage: true } });

    expect(expectOpenAiShapes(chunks, true)).toEqual(['opening', 'content_with_logprobs', 'content_with_logprobs', 'content_with_logprobs', 'finish', 'usage']);
  });

  test.each([true, false])('a reply that only calls: the first call opens the stream (include_usage: %s)', async (includeUsage) => {
    const { chunks } = await streamChunks({
      messages: [{ role: 'user', content: `Weather and time? [emulator-behaviour ${JSON.stringify(twoCalls)}]` }],
      tools: weatherTools,
      ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
    });

    const kinds = expectOpenAiShapes(chunks, includeUsage);
    expect(kinds[0]).toBe('opening_with_call');
    expect(kinds).toContain('call_arguments');
    expect(kinds).toContain('next_call');
    expect(kinds.slice(-2)).toEqual(includeUsage ? ['finish', 'usage'] : ['call_arguments', 'finish']);
  });

  test('text, then calls: the calls follow the text', async () => {
    const behaviour = { ...twoCalls, reply: 'Let me look.' };
    const { chunks } = await streamChunks({ messages: [{ role: 'user', content: `Weather? [emulator-behaviour ${JSON.stringify(behaviour)}]` }], tools: weatherTools });

    const kinds = expectOpenAiShapes(chunks, false);
    expect(kinds.slice(0, 2)).toEqual(['opening', 'content']);
    expect(kinds.filter((kind) => kind === 'next_call')).toHaveLength(2);
  });

  test('another provider behind fhirgate streams the same shapes', async () => {
    const { chunks } = await streamChunks({ model: 'anthropic/claude-haiku-4-5', messages: [{ role: 'user', content: 'two words' }], stream_options: { include_usage: true } });

    expect(expectOpenAiShapes(chunks, true)).toEqual(['opening', 'content', 'content', 'content', 'finish', 'usage']);
  });

  test('a turn replayed from its records (Idempotency-Key) streams the same shapes', async () => {
    const body = { messages: [{ role: 'user', content: `Weather? [emulator-behaviour ${JSON.stringify(twoCalls)}]` }], tools: weatherTools, stream_options: { include_usage: true } };
    const key = { 'Idempotency-Key': `shapes-${Date.now()}` };
    emulator.reset();
    const first = await streamChunks(body, key);
    const replayed = await streamChunks(body, key);

    expect(emulator.received).toHaveLength(1);
    expect(expectOpenAiShapes(replayed.chunks, true)).toEqual(['opening_with_call', 'next_call', 'finish', 'usage']);
    expect(replayed.chunks[0].id).toBe(first.chunks[0].id);
  });
});
