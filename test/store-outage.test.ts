/**
 * The store refusing writes loses nothing and duplicates nothing: a prompt that cannot be stored refuses the turn
 * (503, nothing stored, the provider never called); a reply that cannot be stored is answered as usual, kept in the
 * outbox and written once the store takes writes again; a store that fails for a moment is retried. Checked with
 * the openai SDK as the client and MedplumClient reading what was stored.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MedplumClient } from '@medplum/core';
import type { AuditEvent, Communication, Resource } from '@medplum/fhirtypes';
import OpenAI, { APIError } from 'openai';
import type { LlmEmulator } from './emulator/index.ts';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { withWriteFaults, type FaultyStore } from './support/faulty-store.ts';
import { journaledTurn } from './support/journaled-turns.ts';
import { seedChart, type SeededChart } from './support/seeded-chart.ts';
import { waitFor } from './support/wait-for.ts';

const isReply = (resource: Resource): boolean => resource.resourceType === 'Communication' && !!resource.inResponseTo?.length;
const isPrompt = (resource: Resource): boolean => resource.resourceType === 'Communication' && !!resource.partOf?.length && !resource.inResponseTo?.length;
/** A prompt a user asked (not a side request's). */
const isUserPrompt = (resource: Resource): boolean => resource.resourceType === 'Communication' && isPrompt(resource) && resource.category?.[0]?.coding?.[0]?.code === 'ai-prompt';

describe('the store refusing writes', () => {
  let chatHost: ChatHost;
  let emulator: LlmEmulator;
  let faults: FaultyStore;
  let openai: OpenAI;
  let medplum: MedplumClient;
  let project: SeededProject;

  let journalDir: string;

  beforeAll(async () => {
    journalDir = mkdtempSync(join(tmpdir(), 'fhirgate-store-outage-journal-'));
    chatHost = await startChatHost({
      host: {
        wrapStore: (store) => {
          faults = withWriteFaults(store);
          return faults.repo;
        },
      },
      plugin: { replyJournalDir: journalDir },
    });
    ({ emulator } = chatHost);
  });

  afterAll(async () => {
    await chatHost.close();
    rmSync(journalDir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    faults.heal();
    emulator.reset();
    ({ openai, medplum, project } = await chatClients(chatHost.host));
  });

  const communications = (): Promise<Communication[]> => medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });

  test('a prompt the store will not take: 503 with Retry-After, nothing stored, no provider call', async () => {
    const before = (await communications()).length;
    faults.fail('all');
    const failure = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello?' }] }).catch((error: unknown) => error);
    faults.heal();

    expect(failure).toBeInstanceOf(APIError);
    const apiError = failure as APIError;
    expect(apiError.status).toBe(503);
    expect(apiError.headers?.get('retry-after')).toBe('1');
    expect(apiError.error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('nothing was stored') });
    expect(emulator.received).toHaveLength(0);
    expect((await communications()).length).toBe(before);
  });

  test('a prompt refused so, under an Idempotency-Key: the SDK may retry it (x-should-retry: true), and the same key then runs the turn', async () => {
    const body = { model: MODEL, messages: [{ role: 'user' as const, content: 'Hello again?' }] };
    const options = { headers: { 'Idempotency-Key': 'store-down' } };
    faults.fail('all');
    const failure = (await openai.chat.completions.create(body, options).catch((error: unknown) => error)) as APIError;
    faults.heal();
    expect(failure.status).toBe(503);
    expect(failure.headers?.get('x-should-retry')).toBe('true');

    // Nothing was stored under the key: the request was never accepted, so it runs now.
    const completion = await openai.chat.completions.create(body, options);
    expect(completion.choices[0]?.message.content).toBe('Echo: Hello again?');
    expect(emulator.received).toHaveLength(1);
  });

  test('a prompt the store refuses under an Idempotency-Key leaves no turn open: the same key then runs the turn', async () => {
    const started = (await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'First.' }] })) as unknown as { conversation_id: string };
    const body = { model: MODEL, conversation_id: started.conversation_id, messages: [{ role: 'user' as const, content: 'Once more?' }] };
    const options = { headers: { 'Idempotency-Key': 'prompt-refused' } };
    faults.fail(isUserPrompt);
    const failure = await openai.chat.completions.create(body, options).catch((error: unknown) => error);
    faults.heal();
    expect((failure as APIError).status).toBe(503);

    const completion = await openai.chat.completions.create(body, options);
    expect(completion.choices[0]?.message.content).toBe('Echo: Once more?');
  });

  test('a new conversation whose first prompt the store refuses under an Idempotency-Key: the same key then starts it, once', async () => {
    const before = (await communications()).length;
    const body = { model: MODEL, messages: [{ role: 'user' as const, content: 'A new conversation?' }] };
    const options = { headers: { 'Idempotency-Key': 'first-prompt-refused' } };
    faults.fail(isUserPrompt);
    const failure = await openai.chat.completions.create(body, options).catch((error: unknown) => error);
    faults.heal();
    expect((failure as APIError).status).toBe(503);

    const completion = (await openai.chat.completions.create(body, options)) as FhirgateCompletion;
    expect(completion.choices[0]?.message.content).toBe('Echo: A new conversation?');
    // Sent again, the same answer from the records; one conversation: its root, its prompt, its reply.
    const again = await openai.chat.completions.create(body, options).withResponse();
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data.id).toBe(completion.id);
    const all = await communications();
    expect(all.length - before).toBe(3);
    const conversation = all.filter((record) => record.id === completion.conversation_id || record.partOf?.[0]?.reference === `Communication/${completion.conversation_id}`);
    expect(conversation.map((record) => record.id === completion.conversation_id || record.category?.[0]?.coding?.[0]?.code).sort()).toEqual([true, 'ai-prompt', 'ai-response'].sort());
    expect(emulator.received).toHaveLength(1);
  });

  test("a new conversation whose first prompt the store will not take leaves no root: the AI agent's root is removed again", async () => {
    const before = (await communications()).length;
    faults.fail(isUserPrompt);
    const failure = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello?' }] }).catch((error: unknown) => error);
    faults.heal();

    expect((failure as APIError).status).toBe(503);
    expect(faults.refused).toBeGreaterThanOrEqual(1);
    expect(emulator.received).toHaveLength(0);
    // The root was written (the agent's write went through) and taken back: no conversation without its prompt.
    expect((await communications()).length).toBe(before);
  });

  test('a reply the store will not take is answered, kept, and written once the store is back', async () => {
    faults.fail(isReply);
    const completion = (await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Keep this.' }] })) as unknown as FhirgateCompletion;
    expect(completion.choices[0]?.message.content).toBe('Echo: Keep this.');
    // Tried while the client waited, then kept in the outbox: not in the store yet.
    expect(faults.refused).toBeGreaterThanOrEqual(4);
    await expect(medplum.readResource('Communication', completion.communication_id, { cache: 'no-cache' })).rejects.toThrow();
    // Kept on disk meanwhile, after the lines of the next turn too: were the process to die now, the next start would
    // write this reply.
    const next = (await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'And this.' }] })) as unknown as FhirgateCompletion;
    for (const kept of [completion, next]) {
      expect(journaledTurn(journalDir, kept.communication_id)?.outbox).toMatchObject({ id: kept.communication_id, status: 'completed' });
    }

    faults.heal();
    const reply = await waitFor(() => medplum.readResource('Communication', completion.communication_id, { cache: 'no-cache' }).catch(() => undefined), 15_000);
    expect(reply).toMatchObject({ status: 'completed', payload: [{ contentString: 'Echo: Keep this.' }] });
    await waitFor(async () => (journaledTurn(journalDir, completion.communication_id) === undefined ? true : undefined));
    const thread = (await communications()).filter((record) => record.partOf?.[0]?.reference === `Communication/${completion.conversation_id}`);
    expect(thread.filter(isReply)).toHaveLength(1);
    expect(thread.filter(isPrompt)).toHaveLength(1);
  });

  test('a stream sent twice at once under one key, the store slow to take prompts: one runs, the other is told 409, and the running turn stays whole in the journal', async () => {
    // Both requests find no prompt under the key before either is stored: only the turn running here can tell the second.
    faults.delay(isPrompt, 300);
    // The one call that reaches the model streams for seconds; any later one is answered at once.
    emulator.enqueue({ replyTokens: 200, tokensPerSecond: 40 });
    const body = { model: MODEL, stream: true as const, messages: [{ role: 'user' as const, content: 'Once, while it streams.' }] };
    let replyId = '';
    let seen = '';
    let refused: unknown;
    const reader = new AbortController();
    const read = async (): Promise<void> => {
      try {
        const stream = await openai.chat.completions.create(body, { headers: { 'Idempotency-Key': 'sent-twice-at-once' }, signal: reader.signal });
        for await (const chunk of stream) {
          replyId = chunk.id.replace(/^chatcmpl-/, '');
          seen += chunk.choices[0]?.delta.content ?? '';
        }
      } catch (error) {
        refused ??= (error as { status?: number }).status === 409 ? error : undefined;
      }
    };
    const both = Promise.all([read(), read()]);
    await waitFor(async () => (seen.length > 40 && refused !== undefined ? true : undefined), 20_000);
    faults.heal();
    // Another turn's lines go to the journal after the refusal, with anything the refusal closed.
    await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Something else.' }] });

    // The running turn, as the next start would read it were the process to die now: the text sent, and its charge.
    // Its text reaches the journal in batches: on a busy machine the first may come after the other turn's lines.
    await waitFor(async () => ((journaledTurn(journalDir, replyId)?.delivered.length ?? 0) > 0 ? true : undefined), 10_000);
    const running = journaledTurn(journalDir, replyId);
    expect(seen.startsWith(running?.delivered ?? '-') && (running?.delivered.length ?? 0) > 0).toBe(true);
    expect(running?.charge?.promptTokens).toBeGreaterThan(0);
    reader.abort();
    await both;
    expect(emulator.received).toHaveLength(2);
  });

  test('a streamed reply the store will not take reaches its end, and its record follows with the text streamed', async () => {
    faults.fail(isReply);
    const stream = await openai.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Stream and keep this.' }] });
    let text = '';
    let communicationId: string | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      communicationId ??= (chunk as unknown as { communication_id?: string }).communication_id;
    }
    expect(text).toBe('Echo: Stream and keep this.');
    expect(communicationId).toBeDefined();

    faults.heal();
    const reply = await waitFor(() => medplum.readResource('Communication', communicationId ?? '', { cache: 'no-cache' }).catch(() => undefined), 15_000);
    expect(reply).toMatchObject({ status: 'completed', payload: [{ contentString: text }] });
  });

  test('a store that fails for a moment is tried again: each turn one prompt and one reply, readable at once', async () => {
    const started = (await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Start.' }] })) as unknown as FhirgateCompletion;
    faults.fail(isPrompt, 2);
    const completion = (await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Try again.' }],
      // @ts-expect-error fhirgate's extra request field
      conversation_id: started.conversation_id,
    })) as unknown as FhirgateCompletion;
    expect(faults.refused).toBe(2);
    const reply = await medplum.readResource('Communication', completion.communication_id, { cache: 'no-cache' });
    expect(reply.status).toBe('completed');
    const thread = (await communications()).filter((record) => record.partOf?.[0]?.reference === `Communication/${completion.conversation_id}`);
    expect(thread.filter(isPrompt).map((prompt) => prompt.payload?.[0]?.contentString)).toEqual(['Start.', 'Try again.']);
    expect(thread.filter(isReply)).toHaveLength(2);
    expect(emulator.received).toHaveLength(2);
  });

  test("a disclosure the store will not audit: the patient's chart never reaches the model, and the turn ends with a not-done reply at once", async () => {
    faults.fail((resource) => resource.resourceType === 'AuditEvent');
    const failure = await openai.chat.completions
      .create({
        model: MODEL,
        messages: [{ role: 'user', content: 'About my patient.' }],
        // @ts-expect-error fhirgate's extra request field
        patient_id: project.ids['patient-in-care-team-1'],
      })
      .catch((error: unknown) => error);
    faults.heal();

    expect(failure).toBeInstanceOf(APIError);
    expect((failure as APIError).status).toBe(503);
    expect(emulator.received).toHaveLength(0);
    const records = await communications();
    const prompt = records.find((record) => record.payload?.[0]?.contentString === 'About my patient.');
    const replies = records.filter((record) => record.inResponseTo?.[0]?.reference === `Communication/${prompt?.id}`);
    expect(replies).toHaveLength(1);
    expect(replies[0]).toMatchObject({ status: 'not-done' });
    expect(replies[0].about).toBeUndefined();
    // Nothing was generated, so the reply holds no text; nothing was sent, so it states no history sent.
    expect(replies[0].payload).toBeUndefined();
    const history = replies[0].extension?.find((extension) => extension.url === EXTENSION.history);
    expect(history?.extension).toEqual([{ url: 'count', valueInteger: 0 }]);
  });

  describe('the FHIR tools', () => {
    let chart: SeededChart;
    beforeEach(async () => {
      chart = await seedChart(await chatHost.host.standalone.host.getSystemRepo(project.projectId), project);
    });

    /** A turn whose model searches the patient's heart rates once, then answers. */
    const askWithSearch = (): Promise<unknown> =>
      openai.chat.completions
        .create({
          model: MODEL,
          messages: [{ role: 'user', content: `Pulse? [emulator-behaviour ${JSON.stringify({ toolCalls: [[{ name: 'search_patient_records', arguments: { resource_type: 'Observation', params: { code: 'http://loinc.org|8867-4' } } }]] })}]` }],
          // @ts-expect-error fhirgate's extra request fields
          patient_id: project.ids['patient-in-care-team-1'],
          patient_context: 'tools',
        })
        .catch((error: unknown) => error);
    const auditsOf = (replyId: string): Promise<AuditEvent[]> => medplum.searchResources('AuditEvent', { entity: `Communication/${replyId}` }, { cache: 'no-cache' });

    test("a disclosure the store is slow to audit: the model is given the tool's records only once the AuditEvent is written", async () => {
      faults.delay((resource) => resource.resourceType === 'AuditEvent', 400);
      const completion = (await askWithSearch()) as FhirgateCompletion;
      faults.heal();

      expect(emulator.received).toHaveLength(2);
      expect(JSON.stringify(emulator.received[0].messages)).not.toContain(chart.pulse.id);
      expect(emulator.received[1].messages.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining(chart.pulse.id) });
      const [audit, ...more] = await auditsOf(completion.communication_id);
      expect(more).toHaveLength(0);
      expect(audit.entity?.filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference)).toEqual([`Observation/${chart.pulse.id}`]);
      // The record was written before the request that carried the heart rate reached the model.
      expect(Date.parse(audit.meta?.lastUpdated ?? '')).toBeLessThanOrEqual(emulator.received[1].receivedAt);
    });

    test("a disclosure the store will not audit: the tool's records never reach the model; 503, and a not-done reply that names no record", async () => {
      faults.fail((resource) => resource.resourceType === 'AuditEvent');
      const failure = await askWithSearch();
      // Time for a request that did not wait for the record to reach the model anyway.
      await new Promise((resolve) => setTimeout(resolve, 300));
      faults.heal();

      expect(failure).toBeInstanceOf(APIError);
      expect((failure as APIError).status).toBe(503);
      expect((failure as APIError).error).toMatchObject({ code: 'unavailable' });
      expect(emulator.received).toHaveLength(1);
      expect(JSON.stringify(emulator.received)).not.toContain(chart.pulse.id);
      const records = await communications();
      const prompt = records.find((record) => record.payload?.[0]?.contentString?.startsWith('Pulse?'));
      const replies = records.filter((record) => record.inResponseTo?.[0]?.reference === `Communication/${prompt?.id}`);
      expect(replies).toHaveLength(1);
      expect(replies[0]).toMatchObject({ status: 'not-done' });
      expect(replies[0].about).toBeUndefined();
      expect(replies[0].extension?.filter((extension) => extension.url === EXTENSION.fhirToolCall) ?? []).toHaveLength(0);
      expect(await auditsOf(replies[0].id ?? '')).toHaveLength(0);
    });
  });
});
