/**
 * Shutdown without loss: streams that finish within the grace period finish; the rest end with an in-band
 * `unavailable` error event, and every reply is on record (`completed`, or `stopped` with exactly the text the
 * client received, charged an estimate of what the provider generated) before the host exits. New requests are refused meanwhile. Checked in-process through the
 * plugin's close hook, and on the standalone host's process with SIGTERM.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSearchRequest } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { FhirRepository } from '@medplum/fhir-router';
import OpenAI from 'openai';
import request from 'supertest';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import { openStandaloneStore } from '../plugin/hosts/standalone/open-store.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { demoToken, startHostProcess, until } from './support/host-process.ts';

const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
// The token issuer the host and the token command share (the host listens on a port picked at start).
const ISSUER = 'http://fhirgate.example.test/';

/** What a client saw of one stream: the text, the conversation, and how the stream ended. */
interface StreamSeen {
  text: string;
  conversationId?: string;
  ended: 'done' | 'error' | 'open';
  error?: unknown;
}

/** Reads a stream with the openai SDK, recording what arrives; `seen` is live while it runs. */
function readStream(openai: OpenAI, model: string, seen: StreamSeen): Promise<void> {
  return (async () => {
    try {
      const stream = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tell me everything.' }], stream: true });
      for await (const chunk of stream) {
        seen.conversationId ??= (chunk as unknown as { conversation_id?: string }).conversation_id;
        seen.text += chunk.choices[0]?.delta.content ?? '';
      }
      seen.ended = 'done';
    } catch (error) {
      seen.ended = 'error';
      seen.error = error;
    }
  })();
}

/** The reply Communication of a conversation (one prompt, one reply per turn; these tests make one turn). */
async function replyOf(store: FhirRepository, conversationId: string): Promise<Communication> {
  const records = await store.searchResources<Communication>(parseSearchRequest('Communication', { 'part-of': `Communication/${conversationId}` }));
  const replies = records.filter((record) => record.inResponseTo?.length);
  expect(replies).toHaveLength(1);
  return replies[0];
}

function newSeen(): StreamSeen {
  return { text: '', ended: 'open' };
}

describe("the plugin's close hook", () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let openai: OpenAI;

  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['echo'] });
    host = await startTestHost({
      pluginFor: () => ({ llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: ['echo'] } }, defaultModel: 'emulator/echo' } }),
    });
    const project = host.project as SeededProject;
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    openai = new OpenAI({ baseURL: `${host.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
  }, 60_000);

  afterAll(async () => {
    await host.store.close();
    await rm(host.dataDir, { recursive: true, force: true });
    await emulator.close();
  });

  test('a short stream finishes, a long one is stopped and told, new requests get 503, and both replies are on record', async () => {
    const short = newSeen();
    const long = newSeen();
    emulator.enqueue({ replyTokens: 8, tokensPerSecond: 8 });
    emulator.enqueue({ replyTokens: 400, tokensPerSecond: 20 });
    const shortRead = readStream(openai, 'emulator/echo', short);
    await until(() => short.text.length > 0);
    const longRead = readStream(openai, 'emulator/echo', long);
    await until(() => long.text.length > 0);

    const closing = host.standalone.close({ graceMs: 1500 });
    const refused = await request(host.standalone.app).get('/v1/models').expect(503);
    expect(refused.body.error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('shutting down') });
    expect(refused.headers['retry-after']).toBe('1');
    await closing;
    await Promise.all([shortRead, longRead]);

    expect(short.ended).toBe('done');
    expect(long.ended).toBe('error');
    expect(long.error).toMatchObject({ message: expect.stringContaining('shutting down') });
    const shortReply = await replyOf(host.store, short.conversationId ?? '');
    expect(shortReply.status).toBe('completed');
    expect(shortReply.payload?.[0]?.contentString).toBe(short.text);
    const longReply = await replyOf(host.store, long.conversationId ?? '');
    expect(longReply.status).toBe('stopped');
    expect(longReply.payload?.[0]?.contentString).toBe(long.text);
    expect(long.text.split(' ').length).toBeLessThan(400);
  }, 30_000);
});

describe("the close hook and a Responses stream", () => {
  let emulator: LlmEmulator;
  let host: TestHost;

  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['echo'] });
    host = await startTestHost({
      pluginFor: () => ({ llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: ['echo'] } }, defaultModel: 'emulator/echo' } }),
    });
  }, 60_000);

  afterAll(async () => {
    await host.store.close();
    await rm(host.dataDir, { recursive: true, force: true });
    await emulator.close();
  });

  test('a stream still running after the grace period ends with an unavailable error event, its reply stopped with the text sent', async () => {
    const project = host.project as SeededProject;
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const openai = new OpenAI({ baseURL: `${host.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
    emulator.enqueue({ replyTokens: 400, tokensPerSecond: 20 });
    const stream = openai.responses.stream({ model: 'emulator/echo', input: 'Tell me everything.' });
    let text = '';
    let responseId = '';
    stream.on('response.created', (event) => (responseId = event.response.id));
    stream.on('response.output_text.delta', (event) => (text += event.delta));
    const ended = stream.finalResponse().catch((error: unknown) => error);
    await until(() => text.length > 0);

    await host.standalone.close({ graceMs: 200 });

    expect(await ended).toMatchObject({ code: 'unavailable', message: expect.stringContaining('shutting down') });
    const reply = await host.store.readResource<Communication>('Communication', responseId.replace(/^resp_/, ''));
    expect(reply.status).toBe('stopped');
    expect(reply.payload?.[0]?.contentString).toBe(text);
    // The provider billed what it generated: the reply is charged an estimate of it, marked so.
    const usage = reply.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension ?? [];
    expect(usage.find((part) => part.url === 'estimated')?.valueBoolean).toBe(true);
    expect(usage.find((part) => part.url === 'prompt-tokens')?.valueInteger).toBeGreaterThan(0);
    expect(usage.find((part) => part.url === 'completion-tokens')?.valueInteger).toBeGreaterThanOrEqual(Math.ceil(text.length / 4));
  }, 30_000);
});

describe('SIGTERM on the standalone host process', () => {
  let emulator: LlmEmulator;
  let dataDir: string;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['slow'] });
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-shutdown-'));
  });

  afterAll(async () => {
    child?.kill('SIGKILL');
    await emulator.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('the host stops accepting, ends the open stream cleanly within the grace period, records it as stopped and exits 0', async () => {
    const host = await startHostProcess({
      FHIRGATE_DATA_DIR: dataDir,
      FHIRGATE_BASE_URL: ISSUER,
      AI_PROVIDER: 'openai-compatible',
      AI_API_BASE: `${emulator.url}/v1`,
      AI_MODEL: 'slow',
      FHIRGATE_SHUTDOWN_GRACE_MS: '500',
    });
    child = host.child;
    const { url } = host;
    const token = await demoToken(dataDir, ISSUER);
    const openai = new OpenAI({ baseURL: `${url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': DEMO_PROJECT }, maxRetries: 0 });

    emulator.setBehaviour({ replyTokens: 1000, tokensPerSecond: 20 });
    const seen = newSeen();
    const reading = readStream(openai, 'openai-compatible/slow', seen);
    await until(() => seen.text.length > 0 || seen.ended !== 'open');
    expect(seen.error).toBeUndefined();
    const exited = new Promise<number | null>((resolve) => child?.once('exit', resolve));
    child.kill('SIGTERM');

    await until(() => /"msg":"fhirgate standalone host stopping"/.test(host.logs()));
    await expect(fetch(`${url}healthcheck`)).rejects.toThrow();
    await reading;
    expect(seen.ended).toBe('error');
    expect(seen.error).toMatchObject({ message: expect.stringContaining('shutting down') });
    expect(await exited).toBe(0);
    expect(host.logs()).toContain('"stoppedTurns":1');

    const store = openStandaloneStore(dataDir);
    try {
      const reply = await replyOf(store, seen.conversationId ?? '');
      expect(reply.status).toBe('stopped');
      expect(reply.payload?.[0]?.contentString).toBe(seen.text);
    } finally {
      store.close();
    }
  }, 120_000);
});
