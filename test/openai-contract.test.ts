/**
 * Every answer of fhirgate's OpenAI-compatible routes is what OpenAI's own contract says: real answers of the
 * standalone host (the emulator as the provider) validated against JSON Schemas generated, as the test runs, from
 * the official `openai` package's type declarations (test/support/openai-contract.ts). Chat completions as JSON and
 * every chunk of their streams, with and without tools and usage; Responses as JSON, read back, and every event of
 * their streams, the in-band `error` event of one the server stops included; the models; and the error body of
 * every status. fhirgate's own fields are extensions the contract
 * allows. When the SDK is updated, a field OpenAI newly requires fails here.
 */
import { rm } from 'node:fs/promises';
import type { Project } from '@medplum/fhirtypes';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { openAiContract, type ContractType } from './support/openai-contract.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { sseEvents } from './support/sse-events.ts';

interface Answer {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
}

const behaviour = (content: string, knobs: Record<string, unknown>): string => `${content} [emulator-behaviour ${JSON.stringify(knobs)}]`;
const CALLS = { toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' } }]] };
const CHAT_TOOLS = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const RESPONSE_TOOLS = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }];

const eventsOf = (text: string): { name?: string; data: Record<string, unknown> }[] => sseEvents<Record<string, unknown>>(text);

describe("fhirgate's answers hold to OpenAI's contract, as the openai package declares it", () => {
  const contract = openAiContract();
  const responseEventsSeen = new Set<string>();
  const errorStatusesSeen = new Set<number>();
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let caller: Record<string, string>;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      pluginFor: () => ({
        llm: {
          providers: {
            openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } },
            anthropic: { kind: 'anthropic', apiKey: 'sk-ant-test', baseUrl: emulator.url, models: ['claude-haiku-4-5'] },
          },
          defaultModel: 'openai/gpt-4o-mini',
        },
        chatLimits: { maxConcurrentTurns: 1 },
      }),
    });
    project = host.project as SeededProject;
    caller = { Authorization: `Bearer ${await host.accessTokenFor(project.ids['practitioner-membership'])}`, 'X-Project-ID': project.projectId };
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(() => emulator.reset());

  async function send(method: string, path: string, options: { body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
    const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    const response = await fetch(`${host.url}${path.replace(/^\//, '')}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...(options.headers ?? caller) },
      body,
    });
    return { status: response.status, contentType: response.headers.get('content-type') ?? '', text: await response.text() };
  }

  /** A JSON answer of `status`, valid as `type`. */
  function expectJson(answer: Answer, status: number, type: ContractType, where: string): Record<string, unknown> {
    expect({ where, status: answer.status }).toEqual({ where, status });
    const body = JSON.parse(answer.text) as Record<string, unknown>;
    contract.expectValid(type, body, where);
    return body;
  }

  /** Every chunk of a chat-completions stream valid as a chunk; an in-band error as the error body. */
  function expectChatStream(answer: Answer, where: string): Record<string, unknown>[] {
    expect(answer.contentType).toContain('text/event-stream');
    const events = eventsOf(answer.text).map((event) => event.data);
    expect(events.length).toBeGreaterThan(2);
    for (const [index, event] of events.entries()) {
      contract.expectValid('error' in event ? 'ContractErrorBody' : 'ContractChatCompletionChunk', event, `${where}, data line ${index}`);
    }
    return events;
  }

  /** Every event of a Responses stream valid as the event its `type` names; the Response objects in it too. */
  function expectResponseStream(answer: Answer, where: string): Record<string, unknown>[] {
    expect(answer.contentType).toContain('text/event-stream');
    const events = eventsOf(answer.text);
    for (const [index, { name, data }] of events.entries()) {
      expect(name).toBe(data.type);
      contract.expectResponseEvent(data, `${where}, event ${index}`);
      responseEventsSeen.add(String(data.type));
    }
    return events.map((event) => event.data);
  }

  const chat = (body: Record<string, unknown>, headers?: Record<string, string>) => send('POST', '/v1/chat/completions', { body, headers });
  const responses = (body: Record<string, unknown>, headers?: Record<string, string>) => send('POST', '/v1/responses', { body, headers });

  test('the schemas come from the installed SDK, in a few seconds, and require what the reference requires', () => {
    expect(contract.generationMs).toBeLessThan(20_000);
    expect(contract.responseEventTypes).toEqual(expect.arrayContaining(['response.created', 'response.function_call_arguments.done', 'error']));
    // The reference's requirements the SDK leaves optional are required here: a text part without logprobs fails.
    const part = { type: 'output_text', text: 'x', annotations: [] };
    expect(() => contract.expectResponseEvent({ type: 'response.content_part.done', item_id: 'msg_1', output_index: 0, content_index: 0, sequence_number: 3, part }, 'a part')).toThrow(
      /\/part\/logprobs: required, missing/
    );
  });

  test('chat completions as JSON: a reply, one with a call, one with log probabilities, one from another provider', async () => {
    const plain = expectJson(await chat({ messages: [{ role: 'user', content: 'hello there' }] }), 200, 'ContractChatCompletion', 'a reply');
    expect(plain.choices).toEqual([expect.objectContaining({ logprobs: null, message: expect.objectContaining({ refusal: null }) })]);
    const called = expectJson(await chat({ messages: [{ role: 'user', content: behaviour('Weather?', CALLS) }], tools: CHAT_TOOLS }), 200, 'ContractChatCompletion', 'a call');
    expect(called.choices).toEqual([expect.objectContaining({ finish_reason: 'tool_calls' })]);
    expectJson(await chat({ messages: [{ role: 'user', content: 'two words' }], logprobs: true, top_logprobs: 2 }), 200, 'ContractChatCompletion', 'log probabilities');
    expectJson(await chat({ model: 'anthropic/claude-haiku-4-5', messages: [{ role: 'user', content: 'two words' }] }), 200, 'ContractChatCompletion', 'Anthropic');
  });

  test('chat completions streamed: every chunk, with and without usage, with calls, with log probabilities, and an in-band error', async () => {
    const plain = expectChatStream(await chat({ messages: [{ role: 'user', content: 'two words' }], stream: true }), 'a stream');
    expect(plain.some((chunk) => 'usage' in chunk)).toBe(false);
    const withUsage = expectChatStream(await chat({ messages: [{ role: 'user', content: 'two words' }], stream: true, stream_options: { include_usage: true }, logprobs: true }), 'with usage');
    expect(withUsage.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
    const called = expectChatStream(await chat({ messages: [{ role: 'user', content: behaviour('Weather?', CALLS) }], tools: CHAT_TOOLS, stream: true, stream_options: { include_usage: true } }), 'calls');
    expect(called.some((chunk) => JSON.stringify(chunk).includes('"tool_calls"'))).toBe(true);
    const failing = expectChatStream(await chat({ messages: [{ role: 'user', content: behaviour('hello there friend', { streamErrorAfterTokens: 1 }) }], stream: true }), 'a failing stream');
    expect(failing.at(-1)).toMatchObject({ error: { code: 'upstream_error', param: null } });
  });

  test('the Responses API: JSON, with a call, read back, and every event of its streams, to each way a stream ends', async () => {
    const created = expectJson(await responses({ input: 'hello there', instructions: 'Be brief.' }), 200, 'ContractResponse', 'a response');
    expect(created.usage).toMatchObject({ input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 } });
    expectJson(await responses({ input: behaviour('Weather?', CALLS), tools: RESPONSE_TOOLS }), 200, 'ContractResponse', 'a call');
    expectJson(await responses({ input: 'two words', include: ['message.output_text.logprobs'], top_logprobs: 1 }), 200, 'ContractResponse', 'log probabilities');
    expectJson(await send('GET', `/v1/responses/${String(created.id)}`), 200, 'ContractResponse', 'read back');

    expectResponseStream(await responses({ input: 'two words', stream: true, previous_response_id: created.id }), 'a stream');
    expectResponseStream(await responses({ input: 'two words', stream: true, include: ['message.output_text.logprobs'] }), 'a stream with log probabilities');
    const called = expectResponseStream(await responses({ input: behaviour('Let me see.', { ...CALLS, reply: 'Checking.' }), tools: RESPONSE_TOOLS, stream: true }), 'a stream with a call');
    expect(called.find((event) => event.type === 'response.function_call_arguments.done')).toMatchObject({ name: 'get_weather' });
    expectResponseStream(await responses({ input: behaviour('Go on', { replyTokens: 20 }), max_output_tokens: 2, stream: true }), 'an incomplete stream');
    expectResponseStream(await responses({ input: behaviour('Go on', { replyTokens: 20, streamErrorAfterTokens: 3 }), stream: true }), 'a failed stream');
    expectResponseStream(await send('GET', `/v1/responses/${String(created.id)}?stream=true`), 'read back as a stream');

    // Every event fhirgate sends was seen and held to the contract (`error` aside: the next test shuts a host down).
    expect([...responseEventsSeen].sort()).toEqual(
      [
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
        'response.output_text.delta',
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.completed',
        'response.incomplete',
        'response.failed',
      ].sort()
    );
  });

  test("a stream the server stops while shutting down: the Responses stream's error event and the chat stream's in-band error", async () => {
    // A host of its own, since this test closes it; the same provider, the emulator.
    const stopping = await startTestHost({
      pluginFor: () => ({
        llm: { providers: { openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } } }, defaultModel: 'openai/gpt-4o-mini' },
      }),
    });
    try {
      const stoppingProject = stopping.project as SeededProject;
      const headers = {
        Authorization: `Bearer ${await stopping.accessTokenFor(stoppingProject.ids['practitioner-membership'])}`,
        'X-Project-ID': stoppingProject.projectId,
        'Content-Type': 'application/json',
      };
      // Twenty seconds of reply: still running when the server gives its streams 200 ms to finish.
      const content = behaviour('Tell me everything.', { replyTokens: 400, tokensPerSecond: 20 });
      const open = (path: string, body: Record<string, unknown>) => fetch(`${stopping.url}v1/${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
      // Each answer's headers came: its stream has begun.
      const [chatStream, responseStream] = await Promise.all([open('chat/completions', { messages: [{ role: 'user', content }], stream: true }), open('responses', { input: content, stream: true })]);
      const bodies = Promise.all([chatStream.text(), responseStream.text()]);
      await stopping.standalone.close({ graceMs: 200 });
      const [chatText, responseText] = await bodies;
      const answerOf = (response: globalThis.Response, text: string): Answer => ({ status: response.status, contentType: response.headers.get('content-type') ?? '', text });

      const chatEvents = expectChatStream(answerOf(chatStream, chatText), 'a chat stream the server stops');
      expect(chatEvents.at(-1)).toMatchObject({ error: { code: 'unavailable', param: null, message: expect.stringContaining('shutting down') } });
      const responseEvents = expectResponseStream(answerOf(responseStream, responseText), 'a Responses stream the server stops');
      expect(responseEvents.some((event) => event.type === 'response.output_text.delta')).toBe(true);
      expect(responseEvents.at(-1)).toMatchObject({ type: 'error', code: 'unavailable', param: null, message: expect.stringContaining('shutting down') });
      expect(responseEventsSeen).toContain('error');
    } finally {
      stopping.store.close();
      await rm(stopping.dataDir, { recursive: true, force: true });
    }
  });

  test('the models: the list and one model', async () => {
    const list = await send('GET', '/v1/models');
    expectJson(list, 200, 'ContractModelList', 'the model list');
    for (const model of (JSON.parse(list.text) as { data: unknown[] }).data) {
      contract.expectValid('ContractModel', model, 'a listed model');
    }
    expectJson(await send('GET', '/v1/models/openai%2Fgpt-4o-mini'), 200, 'ContractModel', 'one model');
  });

  test('the error body of every status, with param null where no one field is at fault', async () => {
    const hello = { messages: [{ role: 'user', content: 'hello' }] };
    const error = (answer: Answer, status: number, where: string): { param: unknown } => {
      errorStatusesSeen.add(status);
      return expectJson(answer, status, 'ContractErrorBody', where).error as { param: unknown };
    };
    expect(error(await send('POST', '/v1/chat/completions', { raw: '{"messages": [' }), 400, 'bad JSON').param).toBeNull();
    expect(error(await chat({ ...hello, temperature: 9 }), 400, 'a bad field').param).toBe('temperature');
    expect(error(await responses({ input: 'hello', service_tier: 'ultrafast' }), 400, 'a refused Responses field').param).toBe('service_tier');
    expect(error(await chat(hello, {}), 401, 'no credential').param).toBeNull();
    expect(error(await chat(hello, { ...caller, 'X-Project-ID': 'another-project' }), 403, 'another project').param).toBeNull();
    error(await send('GET', '/v1/responses/resp_nothing-here'), 404, 'an unknown response');
    error(await send('GET', '/v1/models/openai%2Fnone'), 404, 'an unknown model');
    expect(error(await send('GET', '/v1/chat/completions'), 405, 'a method not served').param).toBeNull();
    error(await send('POST', '/v1/chat/completions', { raw: JSON.stringify({ ...hello, padding: 'x'.repeat(1_100_000) }) }), 413, 'too large');
    expect(error(await chat({ messages: [{ role: 'user', content: behaviour('hello', { errorStatus: 500 }) }] }), 500, 'a provider failure').param).toBeNull();

    // The same Idempotency-Key while its turn runs: 409; a second turn while the caller's one runs: 429.
    const slow = { messages: [{ role: 'user', content: behaviour('hello', { latencyMs: 800 }) }] };
    const keyed = { ...caller, 'Idempotency-Key': `contract-${Date.now()}` };
    const running = chat({ ...slow, stream: true }, keyed);
    await new Promise((resolve) => setTimeout(resolve, 200));
    error(await chat({ ...slow, stream: true }, keyed), 409, 'a turn still running');
    await running;
    const busy = chat(slow);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(error(await chat(hello), 429, 'a caller at their limit').param).toBeNull();
    await busy;

    // A project whose settings cannot be read: 503.
    const other = await host.seedProject();
    const stored = await host.store.readResource<Project>('Project', other.projectId);
    await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: 'AI_MODEL_ACCESS', valueString: 'bogus' }] });
    const otherCaller = { Authorization: `Bearer ${await host.accessTokenFor(other.ids['practitioner-membership'])}`, 'X-Project-ID': other.projectId };
    error(await chat(hello, otherCaller), 503, 'a project not configured');

    expect([...errorStatusesSeen].sort()).toEqual([400, 401, 403, 404, 405, 409, 413, 429, 500, 503]);
  });
});
