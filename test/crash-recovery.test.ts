/**
 * A process killed mid-stream loses no record: the standalone host is SIGKILLed while a reply of a continued
 * conversation streams, and the next start records that reply as `stopped`, with the text the client had received,
 * the history the model was sent and an estimate of what the call cost, read back with MedplumClient. The journal of the killed process is adopted and then removed.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { demoToken, startHostProcess, until, type HostProcess } from './support/host-process.ts';

const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const ISSUER = 'http://fhirgate.example.test/';

function startHost(dataDir: string, emulatorUrl: string): Promise<HostProcess> {
  return startHostProcess({
    FHIRGATE_DATA_DIR: dataDir,
    FHIRGATE_BASE_URL: ISSUER,
    AI_PROVIDER: 'openai-compatible',
    AI_API_BASE: `${emulatorUrl}/v1`,
    AI_MODEL: 'slow',
  });
}

describe('SIGKILL mid-stream', () => {
  let emulator: LlmEmulator;
  let dataDir: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['slow'] });
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-crash-'));
  });

  afterAll(async () => {
    children.forEach((child) => child.kill('SIGKILL'));
    await emulator.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('the next start records the reply as stopped with the text the client received and the history the model was sent', async () => {
    const first = await startHost(dataDir, emulator.url);
    children.push(first.child);
    const token = await demoToken(dataDir, ISSUER);
    const openai = new OpenAI({ baseURL: `${first.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': DEMO_PROJECT }, maxRetries: 0 });

    // The conversation's first exchange, answered whole: the turn killed below continues it.
    emulator.setBehaviour({ replyTokens: 5 });
    const opening = await openai.chat.completions.create({ model: 'openai-compatible/slow', messages: [{ role: 'user', content: 'What do you know?' }] });
    const conversationId = (opening as unknown as { conversation_id: string }).conversation_id;

    emulator.setBehaviour({ replyTokens: 1000, tokensPerSecond: 40 });
    let seen = '';
    let failure: unknown;
    const reading = (async () => {
      try {
        const continuing = { conversation_id: conversationId };
        const stream = await openai.chat.completions.create({ model: 'openai-compatible/slow', messages: [{ role: 'user', content: 'Tell me everything.' }], stream: true, ...continuing });
        for await (const chunk of stream) {
          seen += chunk.choices[0]?.delta.content ?? '';
        }
      } catch (error) {
        failure = error;
      }
    })();
    await until(() => seen.length > 40 || failure !== undefined, 20_000);
    const exited = new Promise((resolve) => first.child.once('exit', resolve));
    first.child.kill('SIGKILL');
    await exited;
    await reading;
    // The stream broke: the client did not get the end of the reply.
    expect(failure).toBeDefined();
    expect(seen.length).toBeGreaterThan(40);

    const second = await startHost(dataDir, emulator.url);
    children.push(second.child);
    await until(() => /"msg":"fhirgate recovered unfinished replies"/.test(second.logs()), 20_000);
    expect(second.logs()).toContain('"recovered":1');

    const medplum = new MedplumClient({ baseUrl: second.url, fetch, defaultHeaders: { 'X-Project-ID': DEMO_PROJECT } });
    medplum.setAccessToken(token);
    const records = await medplum.searchResources('Communication', { 'part-of': `Communication/${conversationId}`, _sort: 'sent' });
    const prompts = records.filter((record: Communication) => !record.inResponseTo?.length);
    const replies = records.filter((record: Communication) => record.inResponseTo?.length);
    expect(prompts).toHaveLength(2);
    expect(replies).toHaveLength(2);
    const reply = replies[1];
    expect(reply.status).toBe('stopped');
    expect(reply.inResponseTo?.[0]?.reference).toBe(`Communication/${prompts[1].id}`);
    // It states what the model was sent before the turn's prompt: the first exchange, from its prompt on.
    const history = reply.extension?.find((extension) => extension.url === 'urn:fhirgate:extension:history')?.extension ?? [];
    expect(history.find((part) => part.url === 'count')?.valueInteger).toBe(2);
    expect(history.find((part) => part.url === 'oldest')?.valueReference?.reference).toBe(`Communication/${prompts[0].id}`);
    expect(reply.statusReason?.text).toContain('recorded at the next start');
    // The text is what was journaled before each piece went to the socket: what the client received, or at most
    // the one piece that was being written at the instant of the kill.
    const recorded = reply.payload?.[0]?.contentString ?? '';
    expect(recorded.startsWith(seen)).toBe(true);
    expect(recorded.length - seen.length).toBeLessThanOrEqual(16);
    // Charged what the call cost as far as the journal knows: the prompt it journaled and the text sent, estimated.
    const usage = reply.extension?.find((extension) => extension.url === 'urn:fhirgate:extension:usage')?.extension ?? [];
    expect(usage.find((part) => part.url === 'estimated')?.valueBoolean).toBe(true);
    expect(usage.find((part) => part.url === 'completion-tokens')?.valueInteger).toBe(Math.ceil(recorded.length / 4));
    expect(usage.find((part) => part.url === 'prompt-tokens')?.valueInteger).toBeGreaterThan(0);

    // The killed process's journal was adopted and, its turn recorded, is gone; only the live one's remains.
    const journals = await readdir(join(dataDir, 'journal'));
    expect(journals).toHaveLength(1);
    expect(journals[0]).toMatch(new RegExp(`^${second.child.pid}-`));
  }, 120_000);

  test("a request sent twice at once under one Idempotency-Key: the second's 409 leaves the first's journal whole, and its reply is recorded after a kill", async () => {
    const folder = await mkdtemp(join(tmpdir(), 'fhirgate-crash-key-'));
    const first = await startHost(folder, emulator.url);
    children.push(first.child);
    const token = await demoToken(folder, ISSUER);
    const openai = new OpenAI({ baseURL: `${first.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': DEMO_PROJECT }, maxRetries: 0 });

    emulator.setBehaviour({ replyTokens: 1000, tokensPerSecond: 40 });
    const body = { model: 'openai-compatible/slow', messages: [{ role: 'user' as const, content: 'Tell me once.' }], stream: true as const };
    const options = { headers: { 'Idempotency-Key': 'sent-twice' } };
    let seen = '';
    const read = async (): Promise<unknown> => {
      try {
        for await (const chunk of await openai.chat.completions.create(body, options)) {
          seen += chunk.choices[0]?.delta.content ?? '';
        }
        return undefined;
      } catch (error) {
        return error;
      }
    };
    const both = Promise.all([read(), read()]);
    await until(() => seen.length > 40, 20_000);
    const exited = new Promise((resolve) => first.child.once('exit', resolve));
    first.child.kill('SIGKILL');
    await exited;
    // One of the two was refused as in progress; the other's stream broke at the kill.
    const failures = (await both) as { status?: number }[];
    expect(failures.map((failure) => failure?.status).sort()).toEqual([409, undefined]);

    const second = await startHost(folder, emulator.url);
    children.push(second.child);
    await until(() => /"msg":"fhirgate recovered unfinished replies"/.test(second.logs()), 20_000);
    const medplum = new MedplumClient({ baseUrl: second.url, fetch, defaultHeaders: { 'X-Project-ID': DEMO_PROJECT } });
    medplum.setAccessToken(token);
    const records = await medplum.searchResources('Communication', { _count: '100' });
    const prompts = records.filter((record: Communication) => record.partOf?.length && !record.inResponseTo?.length);
    const replies = records.filter((record: Communication) => record.inResponseTo?.length);
    expect(prompts).toHaveLength(1);
    expect(replies.map((reply) => [reply.status, reply.inResponseTo?.[0]?.reference])).toEqual([['stopped', `Communication/${prompts[0].id}`]]);
    expect((replies[0].payload?.[0]?.contentString ?? '').startsWith(seen)).toBe(true);
    second.child.kill('SIGKILL');
    await rm(folder, { recursive: true, force: true });
  }, 120_000);
});
