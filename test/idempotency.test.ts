/**
 * `Idempotency-Key`: a repeated request gets the same result and never a second turn; two clients racing with one
 * key get one turn; a key reused for another request is refused; a turn whose provider failed is answered with the
 * same error again, never a second provider call, and one whose client left runs again. Without a key, the openai
 * SDK's own retries do not repeat a turn whose provider failed (`x-should-retry: false`). Clients: the openai SDK
 * (with its own retries where a test says so) and MedplumClient.
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI, { APIError } from 'openai';
import { ERROR_CODE_SYSTEM } from '../plugin/chat/fhir-vocabulary.ts';
import type { LlmEmulator } from './emulator/index.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { waitFor } from './support/wait-for.ts';

/** The provider's calls per turn: the first, and fhirgate's one retry. */
const CALLS_PER_FAILED_TURN = 2;

describe('Idempotency-Key', () => {
  let chatHost: ChatHost;
  let emulator: LlmEmulator;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    chatHost = await startChatHost({ provider: { retries: { maxRetries: CALLS_PER_FAILED_TURN - 1, baseDelayMs: 0 } } });
    ({ emulator } = chatHost);
  });

  afterAll(() => chatHost.close());

  beforeEach(async () => {
    emulator.reset();
    ({ openai, medplum } = await chatClients(chatHost.host));
  });

  const communications = (): Promise<Communication[]> => medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });
  const ask = (key: string, content: string, client = openai) =>
    client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content }] }, { headers: { 'Idempotency-Key': key } })
      .withResponse();

  test('the same request again gets the same answer, marked replayed, and no second turn', async () => {
    const first = await ask('key-1', 'Only once, please.');
    const again = await ask('key-1', 'Only once, please.');

    expect(again.data).toEqual(first.data);
    expect((first.data as FhirgateCompletion).id).toBe(`chatcmpl-${(first.data as FhirgateCompletion).communication_id}`);
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(first.response.headers.get('idempotent-replayed')).toBeNull();
    expect(emulator.received).toHaveLength(1);
    // The root, one prompt, one reply.
    expect(await communications()).toHaveLength(3);
  });

  test('a stream repeated with its key replays the same text, ids and finish', async () => {
    const read = async (): Promise<{ text: string; ids: Set<string>; communicationId?: string; finish?: string | null }> => {
      const stream = await openai.chat.completions.create(
        { model: MODEL, stream: true, messages: [{ role: 'user', content: 'Stream it once.' }] },
        { headers: { 'Idempotency-Key': 'stream-key' } }
      );
      const seen: { text: string; ids: Set<string>; communicationId?: string; finish?: string | null } = { text: '', ids: new Set() };
      for await (const chunk of stream) {
        seen.text += chunk.choices[0]?.delta.content ?? '';
        seen.ids.add(chunk.id);
        seen.finish = chunk.choices[0]?.finish_reason ?? seen.finish;
        seen.communicationId ??= (chunk as unknown as { communication_id?: string }).communication_id;
      }
      return seen;
    };
    const first = await read();
    const again = await read();

    expect(again).toEqual(first);
    expect(first.text).toBe('Echo: Stream it once.');
    expect(first.finish).toBe('stop');
    expect(emulator.received).toHaveLength(1);
  });

  test('the same key with another request is a 400, and nothing more is stored', async () => {
    await ask('key-2', 'The first question.');
    const before = (await communications()).length;
    const failure = await ask('key-2', 'A different question.').catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).status).toBe(400);
    expect((failure as APIError).message).toContain('different request');
    expect((await communications()).length).toBe(before);
    expect(emulator.received).toHaveLength(1);
  });

  test('two clients racing with one key: one turn, and both get its answer (the loser retries its 409)', async () => {
    emulator.setBehaviour({ latencyMs: 400 });
    // The SDK's own retries: a 409 is retried after its Retry-After.
    const retrying = openai.withOptions({ maxRetries: 3 });
    const [one, two] = await Promise.all([ask('race', 'Who wins?', retrying), ask('race', 'Who wins?', retrying)]);

    expect(two.data).toEqual(one.data);
    expect(emulator.received).toHaveLength(1);
    expect((await communications()).filter((record) => record.inResponseTo?.length)).toHaveLength(1);
  });

  test('a turn whose provider failed is answered with the same error again, marked replayed: the provider is not called again', async () => {
    emulator.setBehaviour({ errorStatus: 500 });
    const failure = (await ask('retry-me', 'Try until it works.').catch((error: unknown) => error)) as APIError;
    expect(failure).toBeInstanceOf(APIError);
    expect(failure.status).toBe(500);
    expect(failure.headers?.get('x-should-retry')).toBe('false');
    expect(emulator.received).toHaveLength(CALLS_PER_FAILED_TURN);

    // The provider is healthy again: the key still names the turn that failed.
    emulator.setBehaviour({});
    const again = (await ask('retry-me', 'Try until it works.').catch((error: unknown) => error)) as APIError;
    expect(again).toBeInstanceOf(APIError);
    expect({ status: again.status, error: again.error }).toEqual({ status: failure.status, error: failure.error });
    expect(again.error).toMatchObject({ code: 'upstream_error', type: 'api_error' });
    expect(again.headers?.get('idempotent-replayed')).toBe('true');
    expect(again.headers?.get('x-should-retry')).toBe('false');
    expect(emulator.received).toHaveLength(CALLS_PER_FAILED_TURN);

    // One turn on record: the root, its prompt, and its reply `not-done` with the error it was answered with.
    const records = await communications();
    expect(records).toHaveLength(3);
    const reply = records.find((record) => record.inResponseTo?.length);
    expect(reply).toMatchObject({ status: 'not-done', statusReason: { coding: [{ system: ERROR_CODE_SYSTEM, code: 'upstream_error' }], text: (failure.error as { message: string }).message } });
  });

  test('the same for the Responses API: one turn, the error answered again from its record', async () => {
    emulator.setBehaviour({ errorStatus: 500 });
    const create = async (): Promise<APIError> =>
      (await openai.responses.create({ model: MODEL, input: 'Once only.' }, { headers: { 'Idempotency-Key': 'responses-retry' } }).catch((error: unknown) => error)) as APIError;
    const failure = await create();
    emulator.setBehaviour({});
    const again = await create();

    expect(failure.status).toBe(500);
    expect({ status: again.status, error: again.error }).toEqual({ status: failure.status, error: failure.error });
    expect(again.headers?.get('idempotent-replayed')).toBe('true');
    expect(emulator.received).toHaveLength(CALLS_PER_FAILED_TURN);
    expect(await communications()).toHaveLength(3);
  });

  test.each([
    ['chat completion', (client: OpenAI) => client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Fail once.' }] })],
    ['streamed chat completion', (client: OpenAI) => client.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Fail once.' }] })],
    ['Responses API request', (client: OpenAI) => client.responses.create({ model: MODEL, input: 'Fail once.' })],
  ])("without a key, the openai SDK's own retries do not repeat a %s whose provider failed: one turn, fhirgate's retries only", async (_name, call) => {
    emulator.setBehaviour({ errorStatus: 500 });
    // The SDK's default: two retries of a 5xx, unless the answer says x-should-retry: false.
    const failure = (await call(openai.withOptions({ maxRetries: 2 })).catch((error: unknown) => error)) as APIError;

    expect(failure).toBeInstanceOf(APIError);
    expect(failure.status).toBe(500);
    expect(failure.headers?.get('x-should-retry')).toBe('false');
    expect(emulator.received).toHaveLength(CALLS_PER_FAILED_TURN);
    expect(await communications()).toHaveLength(3);
  });

  test('a turn whose client left runs again under its key: a new attempt, each with its own prompt and reply', async () => {
    emulator.setBehaviour({ replyTokens: 40, tokensPerSecond: 20 });
    const controller = new AbortController();
    const body = { model: MODEL, stream: true as const, messages: [{ role: 'user' as const, content: 'Long answer, please.' }] };
    const stream = await openai.chat.completions.create(body, { headers: { 'Idempotency-Key': 'left' }, signal: controller.signal });
    const reading = (async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) {
          controller.abort();
        }
      }
    })();
    await reading.catch(() => undefined);
    await waitFor(async () => ((await communications()).some((record) => record.status === 'stopped') ? true : undefined));

    emulator.setBehaviour({});
    const retried = await openai.chat.completions.create(body, { headers: { 'Idempotency-Key': 'left' } });
    let text = '';
    for await (const chunk of retried) {
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(text).toBe('Echo: Long answer, please.');
    expect(emulator.received).toHaveLength(2);
    const replies = (await communications()).filter((record) => record.inResponseTo?.length);
    expect(replies.map((reply) => reply.status).sort()).toEqual(['completed', 'stopped']);
  });

  test('a malformed key is a 400', async () => {
    const failure = await ask('x'.repeat(256), 'Hello').catch((error: unknown) => error);
    expect((failure as APIError).status).toBe(400);
    expect((failure as APIError).message).toContain('Idempotency-Key');
    expect(emulator.received).toHaveLength(0);
  });
});
