/**
 * An instance lost for good, with its disk: its turns are in the Redis the instances share, and another instance
 * records them. Two registries on a real Redis play the two instances (short timings), and a FHIR store in memory
 * plays the database they share.
 */
import { randomUUID } from 'node:crypto';
import { MemoryRepository } from '@medplum/fhir-router';
import type { Communication } from '@medplum/fhirtypes';
import type { Redis } from 'ioredis';
import { connectTestRedis, describeWithRedis } from '../../test/support/redis.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import { buildReply, type ConversationParties } from './communication-builders.ts';
import { ReplyJournal, type OpenTurn } from './reply-journal.ts';
import { LOST_INSTANCE_REASON, ReplyRecords } from './reply-records.ts';
import { TurnRegistry, type TurnRegistryOptions } from './turn-registry.ts';

const parties: ConversationParties = {
  categorySystem: 'urn:test',
  caller: { reference: 'Practitioner/p1' },
  agent: { reference: 'Device/agent' },
};
const FAST: TurnRegistryOptions = { heartbeatMs: 50, instanceTtlMs: 300, sweepMs: 60_000, textFlushMs: 20, deadlineMs: 2_000 };

describeWithRedis('TurnRegistry', () => {
  let redis: Redis;
  let repo: MemoryRepository;
  let keyPrefix: string;
  const open: { close(): unknown }[] = [];

  test('turns opened while Redis could not be reached are shared, their text whole, once it can', async () => {
    const prompt = await repo.createResource<Communication>({ resourceType: 'Communication', status: 'completed' });
    // A connection that is not ready yet: nothing is sent.
    const connecting = connectTestRedis();
    const registry = new TurnRegistry(connecting, undefined, { ...FAST, keyPrefix });
    open.push(registry);
    const running = turn(prompt.id, new Date().toISOString());
    registry.open(running);
    registry.delivered(running.reply.id, 'Sent while Redis was away.');
    await connecting.ping();
    await waitFor(async () => ((await redis.get(`${keyPrefix}turn-text:${running.reply.id}`)) === 'Sent while Redis was away.' ? true : undefined), 2_000);
    expect(JSON.parse((await redis.hget(`${keyPrefix}turns:${registry.instanceId}`, running.reply.id)) ?? '{}')).toMatchObject({ reply: { id: running.reply.id } });
    registry.closed(running.reply.id);
    registry.close();
    await connecting.quit();
  });

  const instance = (): { registry: TurnRegistry; records: ReplyRecords } => {
    const registry = new TurnRegistry(redis, undefined, { ...FAST, keyPrefix });
    const records = new ReplyRecords({ journal: ReplyJournal.open(undefined), agentRepo: async () => repo, systemRepo: async () => repo, registry, drainDelayMs: 5 });
    open.push(registry, records);
    return { registry, records };
  };
  const turn = (promptId: string, promptSent: string): OpenTurn => ({
    projectId: 'project-1',
    parties,
    reply: { id: randomUUID(), rootId: 'root-1', promptId, modelId: 'openai/gpt-4o-mini', history: { count: 2 } },
    promptSent,
  });

  beforeAll(async () => {
    redis = connectTestRedis();
    await redis.ping();
  });
  afterAll(async () => {
    await redis.quit();
  });
  beforeEach(() => {
    repo = new MemoryRepository();
    keyPrefix = `fhirgate:test:${randomUUID()}:`;
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((item) => item.close()));
  });

  test("a lost instance's turn is recorded by another: stopped, with the text its client was sent, right after its prompt", async () => {
    const prompt = await repo.createResource<Communication>({ resourceType: 'Communication', status: 'completed' });
    const lost = instance();
    const running = turn(prompt.id, '2026-11-25T10:00:00.000Z');
    lost.records.open(running);
    lost.records.delivered(running.reply.id, 'Half of ');
    lost.records.delivered(running.reply.id, 'the answer');
    // The instance is gone: it beats no more, and none of its turns is closed.
    await new Promise((resolve) => setTimeout(resolve, FAST.textFlushMs! * 3));
    lost.registry.close();

    const survivor = instance();
    expect(await survivor.records.sweep()).toBe(0); // its beat has not expired yet
    const taken = await waitFor(async () => ((await survivor.records.sweep()) > 0 ? true : undefined), 5_000);
    expect(taken).toBe(true);

    const reply = await repo.readResource<Communication>('Communication', running.reply.id);
    expect(reply).toMatchObject({ status: 'stopped', statusReason: { text: LOST_INSTANCE_REASON }, payload: [{ contentString: 'Half of the answer' }] });
    expect(reply.sent).toBe('2026-11-25T10:00:00.001Z');
    // Taken once: nothing is left in Redis for anyone else.
    expect(await instance().records.sweep()).toBe(0);
    expect(await redis.keys(`${keyPrefix}*turn*`)).toEqual([]);
  });

  test('a reply the store refused is recorded whole by the instance that takes it over; a turn whose prompt was never stored gets none', async () => {
    const prompt = await repo.createResource<Communication>({ resourceType: 'Communication', status: 'completed' });
    const lost = instance();
    const refused = turn(prompt.id, new Date().toISOString());
    const never = turn('prompt-never-written', new Date().toISOString());
    lost.records.open(refused);
    lost.records.open(never);
    const whole = { ...buildReply(parties, { ...refused.reply, text: 'The whole reply.', status: 'completed', sent: new Date().toISOString() }), id: refused.reply.id };
    lost.registry.outbox(refused.reply.id, whole);
    await new Promise((resolve) => setTimeout(resolve, 50));
    lost.registry.close();

    const survivor = instance();
    await waitFor(async () => ((await survivor.records.sweep()) > 0 ? true : undefined), 5_000);
    await waitFor(async () => (survivor.records.pending === 0 ? true : undefined), 5_000);
    expect(await repo.readResource<Communication>('Communication', refused.reply.id)).toMatchObject({ status: 'completed', payload: [{ contentString: 'The whole reply.' }] });
    await expect(repo.readResource('Communication', never.reply.id)).rejects.toThrow('Not found');
  });

  test("a live instance's turns are never taken, and a closed turn leaves nothing behind", async () => {
    const prompt = await repo.createResource<Communication>({ resourceType: 'Communication', status: 'completed' });
    const live = instance();
    const running = turn(prompt.id, new Date().toISOString());
    live.records.open(running);
    await new Promise((resolve) => setTimeout(resolve, FAST.instanceTtlMs! * 2));
    expect(await instance().records.sweep()).toBe(0);

    live.records.abandon(running.reply.id);
    await waitFor(async () => ((await redis.hlen(`${keyPrefix}turns:${live.registry.instanceId}`)) === 0 ? true : undefined), 2_000);
  });
});
