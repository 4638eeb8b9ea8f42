/**
 * `Idempotency-Key`: a repeated request gets the same result and never a second turn; two clients racing with one
 * key get one turn; a key reused for another request is refused; a turn whose provider failed may be retried
 * under its key. Clients: the openai SDK (with its own retries where a test says so) and MedplumClient.
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI, { APIError } from 'openai';
import type { LlmEmulator } from './emulator/index.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';

describe('Idempotency-Key', () => {
  let chatHost: ChatHost;
  let emulator: LlmEmulator;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    chatHost = await startChatHost({ provider: { retries: { maxRetries: 0 } } });
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

  test('a turn whose provider failed may be retried under its key: a new attempt, each with its own prompt and reply', async () => {
    emulator.enqueue({ errorStatus: 500 });
    const failure = await ask('retry-me', 'Try until it works.').catch((error: unknown) => error);
    expect((failure as APIError).status).toBe(500);

    const retried = await ask('retry-me', 'Try until it works.');
    const replayed = await ask('retry-me', 'Try until it works.');

    expect(retried.data.choices[0]?.message.content).toBe('Echo: Try until it works.');
    expect(replayed.data).toEqual(retried.data);
    expect(emulator.received).toHaveLength(2);
    const replies = (await communications()).filter((record) => record.inResponseTo?.length);
    expect(replies.map((reply) => reply.status).sort()).toEqual(['completed', 'not-done']);
  });

  test('a malformed key is a 400', async () => {
    const failure = await ask('x'.repeat(256), 'Hello').catch((error: unknown) => error);
    expect((failure as APIError).status).toBe(400);
    expect((failure as APIError).message).toContain('Idempotency-Key');
    expect(emulator.received).toHaveLength(0);
  });
});
