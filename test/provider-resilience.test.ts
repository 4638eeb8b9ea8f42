/**
 * Provider failures that may pass are ridden out before the client sees a byte: a 503 is tried again, a
 * Retry-After is honoured, a model that keeps failing falls back to the next configured one (which the response
 * and the record name), and a stream that already sent text is never retried. First-token and total timeouts
 * bound a call. The client is the openai SDK; records are read with MedplumClient.
 */
import { createServer, type AddressInfo, type Server } from 'node:net';
import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI, { APIError } from 'openai';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';

describe('provider failures that may pass', () => {
  let emulator: LlmEmulator;
  // A provider endpoint that accepts TCP connections and never completes the TLS handshake.
  let silent: Server;
  let host: TestHost;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const silentUrl = `https://127.0.0.1:${(silent.address() as AddressInfo).port}/v1`;
    const provider = { kind: 'openai-compatible' as const, apiKey: 'sk-test', baseUrl: `${emulator.url}/v1` };
    host = await startTestHost({
      plugin: {
        llm: {
          providers: {
            primary: { ...provider, models: ['echo'], retries: { maxRetries: 2, baseDelayMs: 20, maxDelayMs: 2000 } },
            backup: { ...provider, models: ['echo-backup'], retries: { maxRetries: 0 } },
            // Quick to give up: the first event within 300 ms, the whole call within 1.5 s; no retries.
            bounded: { ...provider, models: ['slow'], firstTokenTimeoutMs: 300, totalTimeoutMs: 1500, timeoutMs: 5000, retries: { maxRetries: 0 } },
            unreachable: { ...provider, baseUrl: silentUrl, models: ['any'], connectTimeoutMs: 300, timeoutMs: 20_000, retries: { maxRetries: 0 } },
          },
          defaultModel: 'primary/echo',
          fallbacks: { 'primary/echo': ['backup/echo-backup'] },
        },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
    silent.close();
  });

  beforeEach(async () => {
    emulator.reset();
    ({ openai, medplum } = await chatClients(host));
  });

  const thread = async (conversationId: string): Promise<Communication[]> =>
    medplum.searchResources('Communication', { 'part-of': `Communication/${conversationId}` }, { cache: 'no-cache' });
  const modelOf = (reply: Communication): string | undefined => reply.extension?.find((extension) => extension.url === EXTENSION.model)?.valueString;

  test('a 503 is tried again and answered: the client sees one reply, the store one prompt and one reply', async () => {
    emulator.enqueue({ errorStatus: 503 });
    const completion = (await openai.chat.completions.create({ model: 'primary/echo', messages: [{ role: 'user', content: 'Hello' }] })) as unknown as FhirgateCompletion;

    expect(completion.choices[0]?.message.content).toBe('Echo: Hello');
    expect(emulator.received.map((received) => received.outcome)).toEqual(['errored', 'completed']);
    const records = await thread(completion.conversation_id);
    expect(records).toHaveLength(2);
    expect(records.find((record) => record.inResponseTo)?.status).toBe('completed');
  });

  test("the provider's Retry-After is waited for before the next try", async () => {
    emulator.enqueue({ errorStatus: 429, retryAfterSeconds: 1 });
    const startedAt = Date.now();
    const completion = await openai.chat.completions.create({ model: 'primary/echo', messages: [{ role: 'user', content: 'Patience' }] });

    expect(completion.choices[0]?.message.content).toBe('Echo: Patience');
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1000);
    expect(emulator.received).toHaveLength(2);
  });

  test('a model that keeps failing falls back to the next one, which the response and the record name', async () => {
    for (let index = 0; index < 3; index++) emulator.enqueue({ errorStatus: 500 });
    const stream = await openai.chat.completions.create({ model: 'primary/echo', stream: true, messages: [{ role: 'user', content: 'Anyone?' }] });
    let text = '';
    const models = new Set<string>();
    let conversationId = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      models.add(chunk.model);
      conversationId ||= (chunk as unknown as { conversation_id: string }).conversation_id;
    }

    expect(text).toBe('Echo: Anyone?');
    expect([...models]).toEqual(['backup/echo-backup']);
    expect(emulator.received.map((received) => received.model)).toEqual(['echo', 'echo', 'echo', 'echo-backup']);
    const reply = (await thread(conversationId)).find((record) => record.inResponseTo);
    expect(reply && modelOf(reply)).toBe('backup/echo-backup');
  });

  test('a stream that already sent text is never tried again: the client gets the in-band error, the reply is not-done', async () => {
    emulator.enqueue({ replyTokens: 20, streamErrorAfterTokens: 3 });
    const stream = await openai.chat.completions.create({ model: 'primary/echo', stream: true, messages: [{ role: 'user', content: 'Go' }] });
    let text = '';
    let conversationId = '';
    const failure = await (async () => {
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        conversationId ||= (chunk as unknown as { conversation_id: string }).conversation_id;
      }
    })().catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(APIError);
    expect(text.length).toBeGreaterThan(0);
    expect(emulator.received).toHaveLength(1);
    const reply = (await thread(conversationId)).find((record) => record.inResponseTo);
    expect(reply).toMatchObject({ status: 'not-done', payload: [{ contentString: text }] });
  });

  test('a first token that does not come within firstTokenTimeoutMs is a 500 upstream_timeout, long before timeoutMs', async () => {
    emulator.enqueue({ latencyMs: 3000 });
    const startedAt = Date.now();
    const failure = await openai.chat.completions
      .create({ model: 'bounded/slow', stream: true, messages: [{ role: 'user', content: 'Wake up' }] })
      .catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).status).toBe(500);
    expect((failure as APIError).message).toContain('within 300 ms');
    expect(Date.now() - startedAt).toBeLessThan(2500);
  });

  test('a stream that keeps going past totalTimeoutMs is ended with an in-band upstream_timeout', async () => {
    // A token every 100 ms (each within the 5 s wait), 100 of them: 10 s in all, against a 1.5 s total.
    emulator.enqueue({ replyTokens: 100, tokensPerSecond: 10 });
    const stream = await openai.chat.completions.create({ model: 'bounded/slow', stream: true, messages: [{ role: 'user', content: 'Talk' }] });
    let text = '';
    const failure = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).message).toContain('within 1500 ms');
    expect(text.length).toBeGreaterThan(0);
  });

  test('a provider that never completes the connection is a 504 after connectTimeoutMs, long before timeoutMs', async () => {
    const startedAt = Date.now();
    const failure = await openai.chat.completions
      .create({ model: 'unreachable/any', messages: [{ role: 'user', content: 'Hello?' }] })
      .catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).status).toBe(500);
    expect((failure as APIError).message).toContain('within 300 ms');
    // The connection pool checks its limit on a coarse (one second) timer: well within the 20 s wait limit.
    expect(Date.now() - startedAt).toBeLessThan(5000);
  });
});
