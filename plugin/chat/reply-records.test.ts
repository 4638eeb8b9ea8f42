import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OperationOutcomeError, forbidden, serverError, tooManyRequests } from '@medplum/core';
import { MemoryRepository } from '@medplum/fhir-router';
import type { Communication, Resource } from '@medplum/fhirtypes';
import { buildReply } from './communication-builders.ts';
import { EXTENSION } from './fhir-vocabulary.ts';
import type { HostLogger } from '../host.ts';
import { ReplyJournal, type OpenTurn, type UnfinishedTurn } from './reply-journal.ts';
import { isPassingFailure, LOST_INSTANCE_REASON, RECOVERED_REASON, ReplyRecords, requireStored, type ReplyRecordsOptions } from './reply-records.ts';
import type { TurnRegistry } from './turn-registry.ts';
import { until } from '../../test/support/host-process.ts';

/** A repository whose creates fail while `failures` is above 0 (or always, with Infinity). */
class FlakyRepository extends MemoryRepository {
  failures = 0;
  refusal: 'server' | 'forbidden' = 'server';
  creates = 0;
  refused = 0;
  override async createResource<T extends Resource>(resource: T, options?: { assignedId?: boolean }): Promise<T & { id: string }> {
    this.creates++;
    if (this.failures > 0) {
      this.failures--;
      this.refused++;
      throw new OperationOutcomeError(this.refusal === 'server' ? serverError(new Error('down')) : forbidden);
    }
    return super.createResource(resource, options);
  }
}

const parties: OpenTurn['parties'] = { categorySystem: 'urn:test', caller: { reference: 'Practitioner/dr' }, agent: { reference: 'Device/agent' } };
const openTurn = (id: string, promptId: string): OpenTurn => ({
  projectId: 'project-1',
  parties,
  reply: { id, rootId: 'root-1', promptId, modelId: 'm', history: { count: 2 } },
});
const reply = (id: string, text: string): Communication & { id: string } => ({
  ...buildReply(parties, { id, rootId: 'root-1', promptId: 'p', modelId: 'm', history: { count: 0 }, text, status: 'completed', sent: new Date().toISOString() }),
  id,
});

/** A logger that keeps its info and warn lines as [message, fields]. */
function keptLines(): { logger: HostLogger; info: [string, Record<string, unknown> | undefined][]; warn: [string, Record<string, unknown> | undefined][] } {
  const info: [string, Record<string, unknown> | undefined][] = [];
  const warn: [string, Record<string, unknown> | undefined][] = [];
  const logger: HostLogger = { debug: () => undefined, info: (message, fields) => info.push([message, fields]), warn: (message, fields) => warn.push([message, fields]), error: () => undefined };
  return { logger, info, warn };
}

/**
 * The turn registry as ReplyRecords uses it (turn-registry.test.ts runs the real one, on Redis): every other
 * instance's lost turns are handed out by its next claim.
 */
class LostInstances {
  readonly sweepMs: number;
  lost: UnfinishedTurn[] = [];
  claims = 0;
  constructor(sweepMs: number) {
    this.sweepMs = sweepMs;
  }
  async claimLost(): Promise<UnfinishedTurn[]> {
    this.claims++;
    return this.lost.splice(0);
  }
  open(): void {}
  history(): void {}
  toolCall(): void {}
  delivered(): void {}
  outbox(): void {}
  closed(): void {}
  asRegistry(): TurnRegistry {
    return this as unknown as TurnRegistry;
  }
}

/**
 * A journal opened at `folder` and a way to hand it the journals adopted while it runs, as journal-lease.ts does when
 * a writer's lease expires (journal-lease.test.ts takes one over for real).
 */
function adoptingJournal(folder: string): { journal: ReplyJournal; adopt: (turns: readonly UnfinishedTurn[]) => void } {
  const journal = ReplyJournal.open(folder);
  let listener: ((turns: readonly UnfinishedTurn[]) => void) | undefined;
  journal.onAdopted = (registered) => {
    listener = registered;
  };
  return { journal, adopt: (turns) => listener?.(turns) };
}

/** Timers that keep the process running (an unref'd timer does not). */
const timersHeld = (): number => process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;

describe('ReplyRecords', () => {
  let root: string;
  let repo: FlakyRepository;
  const records: ReplyRecords[] = [];
  /** The replies of stopped processes told to the budgets: id, and whether that process had counted it. */
  let recoveredTold: [string, boolean][] = [];
  const start = (journal: ReplyJournal, options: Partial<ReplyRecordsOptions> = {}): ReplyRecords => {
    const created = new ReplyRecords({
      journal,
      agentRepo: async () => repo,
      systemRepo: async () => repo,
      onRecovered: (_projectId, written, counted) => recoveredTold.push([written.id, counted]),
      retryDelaysMs: [1, 1, 1],
      drainDelayMs: 5,
      maxDrainDelayMs: 20,
      ...options,
    });
    records.push(created);
    return created;
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'fhirgate-records-'));
    repo = new FlakyRepository();
    recoveredTold = [];
  });
  afterEach(async () => {
    await Promise.all(records.splice(0).map((item) => item.close()));
    rmSync(root, { recursive: true, force: true });
  });

  test('a store failing for a moment is retried: stored, once', async () => {
    const subject = start(ReplyJournal.open(root));
    repo.failures = 2;
    await expect(subject.record('project-1', reply('r1', 'hi'))).resolves.toBe('stored');
    expect(repo.creates).toBe(3);
    expect(await repo.readResource('Communication', 'r1')).toMatchObject({ payload: [{ contentString: 'hi' }] });
  });

  test('a reply the store keeps refusing goes to the outbox and is written, once, when the store is back', async () => {
    const subject = start(ReplyJournal.open(root));
    subject.open(openTurn('r2', 'p'));
    repo.failures = Number.POSITIVE_INFINITY;
    await expect(subject.record('project-1', reply('r2', 'kept'))).resolves.toBe('outbox');
    expect(subject.pending).toBe(1);
    repo.failures = 0;
    for (let waited = 0; subject.pending > 0 && waited < 2000; waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(subject.pending).toBe(0);
    expect(await repo.readResource('Communication', 'r2')).toMatchObject({ payload: [{ contentString: 'kept' }] });
    // Written once: the drain's one successful create, after the refused tries.
    expect(repo.creates - repo.refused).toBe(1);
    // This process counted it when it recorded it: the budgets are not told of it again.
    expect(recoveredTold).toEqual([]);
  });

  test('a refusal (4xx) is not retried: the reply goes straight to the outbox', async () => {
    const subject = start(ReplyJournal.open(root));
    repo.failures = 1;
    repo.refusal = 'forbidden';
    await expect(subject.record('project-1', reply('r3', 'x'))).resolves.toBe('outbox');
    expect(repo.creates).toBe(1);
  });

  test("the next start records a killed process's turns: stopped with the delivered text if the prompt is stored, nothing if not", async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-stored', status: 'completed' }, { assignedId: true });
    const dying = ReplyJournal.open(root);
    dying.open(openTurn('r-stored', 'prompt-stored'));
    dying.delivered('r-stored', 'Half of ');
    dying.delivered('r-stored', 'it');
    dying.open(openTurn('r-never', 'prompt-never-written'));

    const subject = start(ReplyJournal.open(root));
    await expect(subject.recover()).resolves.toEqual({ recovered: 2, pending: 0 });
    expect(await repo.readResource('Communication', 'r-stored')).toMatchObject({
      status: 'stopped',
      statusReason: { text: RECOVERED_REASON },
      payload: [{ contentString: 'Half of it' }],
      inResponseTo: [{ reference: 'Communication/prompt-stored' }],
    });
    await expect(repo.readResource('Communication', 'r-never')).rejects.toThrow('Not found');
    // A journal of before charges: no prompt known, so no estimate; the budgets are told of the reply all the same.
    expect((await repo.readResource<Communication>('Communication', 'r-stored')).extension?.some((extension) => extension.url === EXTENSION.usage)).toBe(false);
    expect(recoveredTold).toEqual([['r-stored', false]]);
  });

  test('a turn whose reply was stored but whose closed line a crash kept out is closed at the next start, its reply left as stored', async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-1', status: 'completed' }, { assignedId: true });
    const dying = ReplyJournal.open(root);
    dying.open(openTurn('r-1', 'prompt-1'));
    dying.delivered('r-1', 'The whole answer.');
    // The reply reached the store; the process was killed before the journal's `closed` line was written.
    await repo.createResource(reply('r-1', 'The whole answer.'), { assignedId: true });
    const creates = repo.creates;

    const subject = start(ReplyJournal.open(root, { closedLinesWaitMs: 10 }));
    await expect(subject.recover()).resolves.toEqual({ recovered: 1, pending: 0 });
    expect(repo.creates).toBe(creates);
    expect(await repo.readResource('Communication', 'r-1')).toMatchObject({ status: 'completed', payload: [{ contentString: 'The whole answer.' }] });
    expect(recoveredTold).toEqual([]);
    // Closed now (its line written within the journal's wait for closed lines): a third start finds nothing to do.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(ReplyJournal.open(root).unfinished).toEqual([]);
  });

  test("a killed process's turn whose prompt the journal knows is recorded charged an estimate: the prompt and the text sent, at the model's price", async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-priced', status: 'completed' }, { assignedId: true });
    const dying = ReplyJournal.open(root);
    dying.open({ ...openTurn('r-priced', 'prompt-priced'), charge: { promptTokens: 120, price: { inputPerToken: 150, outputPerToken: 600 } } });
    dying.delivered('r-priced', 'Twelve chars');
    dying.writeWaiting();

    const subject = start(ReplyJournal.open(root));
    await subject.recover();
    const recovered = await repo.readResource<Communication>('Communication', 'r-priced');
    expect(recovered.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension).toEqual([
      { url: 'prompt-tokens', valueInteger: 120 },
      { url: 'completion-tokens', valueInteger: 3 },
      { url: 'total-tokens', valueInteger: 123 },
      { url: 'cost', valueMoney: { value: (120 * 150 + 3 * 600) / 1e9, currency: 'USD' } },
      { url: 'estimated', valueBoolean: true },
    ]);
    expect(recoveredTold).toEqual([['r-priced', false]]);
  });

  test("what a turn tells its records reaches the journal: a killed process's reply keeps its history, its FHIR tool calls and the text sent", async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-told', status: 'completed' }, { assignedId: true });
    const dying = start(ReplyJournal.open(root));
    dying.open(openTurn('r-told', 'prompt-told'));
    dying.history('r-told', { count: 7, oldest: 'c-oldest' });
    dying.toolCall('r-told', { id: 'call_1', name: 'search_fhir', arguments: '{"type":"Observation"}', result: '[]', shared: [] });
    dying.delivered('r-told', 'Sent before the kill.');
    // The text frame waits for its line; the journal tells when the line is in the file.
    const written = new Promise<unknown>((resolve) => expect(dying.whenWritten(resolve)).toBe(true));
    await expect(written).resolves.toBeUndefined();

    const subject = start(ReplyJournal.open(root));
    await subject.recover();
    const recovered = await repo.readResource<Communication>('Communication', 'r-told');
    expect(recovered.payload).toEqual([{ contentString: 'Sent before the kill.' }]);
    expect(recovered.extension?.find((extension) => extension.url === EXTENSION.history)?.extension).toEqual([
      { url: 'count', valueInteger: 7 },
      { url: 'oldest', valueReference: { reference: 'Communication/c-oldest' } },
    ]);
    expect(recovered.extension?.find((extension) => extension.url === EXTENSION.fhirToolCall)?.extension).toContainEqual({ url: 'name', valueString: 'search_fhir' });
  });

  test('a reply on record closes its turn: no longer open here, nothing for the next start', async () => {
    const subject = start(ReplyJournal.open(root, { closedLinesWaitMs: 5 }));
    subject.open(openTurn('r-done', 'p'));
    expect(subject.isOpen('r-done')).toBe(true);
    await expect(subject.record('project-1', reply('r-done', 'done'))).resolves.toBe('stored');
    expect(subject.isOpen('r-done')).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(ReplyJournal.open(root).unfinished).toEqual([]);
  });

  test('a write the store keeps failing is tried once and then once after each delay, then kept in the outbox, saying so', async () => {
    const { logger, warn: warnings } = keptLines();
    const subject = start(ReplyJournal.open(root), { logger, drainDelayMs: 60_000 });
    repo.failures = Number.POSITIVE_INFINITY;
    await expect(subject.record('project-1', reply('r-tries', 'x'))).resolves.toBe('outbox');
    expect(repo.creates).toBe(4);
    expect(warnings).toEqual([['fhirgate kept a reply in the outbox: the store did not take it', { replyId: 'r-tries', status: 500 }]]);
  });

  test('a failure with no FHIR outcome (a lost connection) may pass; a 4xx refusal, a 429 included, does not', () => {
    expect(isPassingFailure(new Error('socket hang up'))).toBe(true);
    expect(isPassingFailure(new OperationOutcomeError(serverError(new Error('down'))))).toBe(true);
    expect(isPassingFailure(new OperationOutcomeError(forbidden))).toBe(false);
    expect(isPassingFailure(new OperationOutcomeError(tooManyRequests))).toBe(false);
  });

  test('a write the turn needs that the store refuses (4xx) fails as refused; one that keeps failing is 503 unavailable', async () => {
    await expect(requireStored(() => Promise.reject(new OperationOutcomeError(forbidden)))).rejects.toMatchObject({ outcome: { issue: [{ code: 'forbidden' }] } });
    await expect(requireStored(() => Promise.reject(new Error('socket hang up')))).rejects.toMatchObject({ code: 'unavailable', retryAfterSeconds: 1 });
  }, 10_000);

  test('a start with nothing left unfinished recovers nothing and says nothing; one whose store is still down says what is pending', async () => {
    const { logger, info: lines } = keptLines();
    const quiet = start(ReplyJournal.open(root), { logger, drainDelayMs: 60_000 });
    await expect(quiet.recover()).resolves.toEqual({ recovered: 0, pending: 0 });
    expect(lines).toEqual([]);
    await quiet.close();

    await repo.createResource({ resourceType: 'Communication', id: 'prompt-pending', status: 'completed' }, { assignedId: true });
    const dying = ReplyJournal.open(join(root, 'other'));
    dying.open(openTurn('r-pending', 'prompt-pending'));
    repo.failures = Number.POSITIVE_INFINITY;
    const subject = start(ReplyJournal.open(join(root, 'other')), { logger, drainDelayMs: 60_000 });
    await expect(subject.recover()).resolves.toEqual({ recovered: 0, pending: 1 });
    expect(lines).toEqual([['fhirgate recovered unfinished replies', { recovered: 0, pending: 1 }]]);
  });

  test('close() tries the outbox once more; after it, nothing is written until the next start', async () => {
    const subject = start(ReplyJournal.open(root), { retryDelaysMs: [], drainDelayMs: 20 });
    repo.failures = Number.POSITIVE_INFINITY;
    await subject.record('project-1', reply('r-last', 'last round'));
    // The store is back by the time the server stops: the last round writes it.
    repo.failures = 0;
    await subject.close();
    expect(await repo.readResource('Communication', 'r-last')).toMatchObject({ payload: [{ contentString: 'last round' }] });

    const closing = start(ReplyJournal.open(join(root, 'closing')), { retryDelaysMs: [], drainDelayMs: 20 });
    repo.failures = Number.POSITIVE_INFINITY;
    await closing.record('project-1', reply('r-scheduled', 'scheduled'));
    await closing.close();
    const closed = start(ReplyJournal.open(join(root, 'closed')), { retryDelaysMs: [], drainDelayMs: 20 });
    await closed.close();
    await closed.record('project-1', reply('r-after', 'after close'));
    // The store comes back after the close: no drain of either process writes its reply.
    repo.failures = 0;
    await new Promise((resolve) => setTimeout(resolve, 100));
    await expect(repo.readResource('Communication', 'r-scheduled')).rejects.toThrow('Not found');
    await expect(repo.readResource('Communication', 'r-after')).rejects.toThrow('Not found');
  });

  test('a drain round the store fails is logged and tried again later: the reply is written once the store is back', async () => {
    const { logger, warn: warnings } = keptLines();
    const subject = start(ReplyJournal.open(root), { logger, retryDelaysMs: [] });
    repo.failures = Number.POSITIVE_INFINITY;
    await subject.record('project-1', reply('r-later', 'later'));
    await until(() => warnings.length >= 2, 2000);
    expect(warnings[1]).toEqual(['fhirgate could not write a reply from the outbox yet', { replyId: 'r-later', status: 500 }]);
    repo.failures = 0;
    await until(() => subject.pending === 0, 2000);
    expect(await repo.readResource('Communication', 'r-later')).toMatchObject({ payload: [{ contentString: 'later' }] });
  });

  test('while the store stays down the drain backs off, doubling its wait up to maxDrainDelayMs, and starts again from drainDelayMs', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const subject = start(ReplyJournal.open(root), { retryDelaysMs: [], drainDelayMs: 100, maxDrainDelayMs: 400 });
      repo.failures = Number.POSITIVE_INFINITY;
      await subject.record('project-1', reply('r-backoff', 'x'));
      const tries = (): number => repo.creates - 1;
      // Rounds at 100, 200 (+100), 400 (+200), 800 (+400), 1200 (+400): never closer than the wait before.
      await jest.advanceTimersByTimeAsync(1000);
      expect(tries()).toBe(4);
      await jest.advanceTimersByTimeAsync(200);
      expect(tries()).toBe(5);
      repo.failures = 0;
      await jest.advanceTimersByTimeAsync(400);
      expect(subject.pending).toBe(0);
      // Once the outbox was empty, the next reply kept there is tried after drainDelayMs again.
      repo.failures = Number.POSITIVE_INFINITY;
      await subject.record('project-1', reply('r-again', 'y'));
      const before = repo.creates;
      repo.failures = 0;
      await jest.advanceTimersByTimeAsync(100);
      expect(repo.creates).toBe(before + 1);
    } finally {
      jest.useRealTimers();
    }
  });

  test("a start whose store is still down tries its recovered replies again later, by itself", async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-down', status: 'completed' }, { assignedId: true });
    const dying = ReplyJournal.open(root);
    dying.open(openTurn('r-down', 'prompt-down'));
    dying.delivered('r-down', 'Said before the restart.');
    dying.writeWaiting();
    repo.failures = Number.POSITIVE_INFINITY;
    const subject = start(ReplyJournal.open(root));
    await expect(subject.recover()).resolves.toEqual({ recovered: 0, pending: 1 });
    repo.failures = 0;
    await until(() => subject.pending === 0, 2000);
    expect(await repo.readResource('Communication', 'r-down')).toMatchObject({ status: 'stopped', payload: [{ contentString: 'Said before the restart.' }] });
  });

  test('text the stream sends at once is in the journal before writeWaiting returns', () => {
    const subject = start(ReplyJournal.open(root));
    subject.open(openTurn('r-first', 'p'));
    subject.delivered('r-first', 'First words');
    subject.writeWaiting();
    // Read before this turn of the event loop ends: only a line already written can be there.
    expect(ReplyJournal.open(root).unfinished.map((turn) => [turn.reply.id, turn.delivered])).toEqual([['r-first', 'First words']]);
  });

  /** The turns a stopped process left unfinished, each opened and sent `text`, as a journal reads them. */
  const leftUnfinished = (folder: string, turns: readonly (readonly [string, string, string])[]): UnfinishedTurn[] => {
    const dying = ReplyJournal.open(join(root, folder));
    for (const [id, promptId, text] of turns) {
      dying.open(openTurn(id, promptId));
      dying.delivered(id, text);
    }
    dying.writeWaiting();
    return [...ReplyJournal.open(join(root, folder)).unfinished];
  };

  test("a lost instance's turns are taken over by the sweep, every sweepMs by itself: stopped, with the text sent, said once in the log", async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-lost', status: 'completed' }, { assignedId: true });
    const registry = new LostInstances(10);
    const { logger, info } = keptLines();
    start(ReplyJournal.open(root), { registry: registry.asRegistry(), logger });
    registry.lost = leftUnfinished('lost', [['r-lost', 'prompt-lost', 'Half of it'], ['r-no-prompt', 'prompt-never-written', 'x']]);
    await until(() => recoveredTold.length > 0, 2000);
    expect(await repo.readResource('Communication', 'r-lost')).toMatchObject({
      status: 'stopped',
      statusReason: { text: LOST_INSTANCE_REASON },
      payload: [{ contentString: 'Half of it' }],
    });
    await expect(repo.readResource('Communication', 'r-no-prompt')).rejects.toThrow('Not found');
    expect(recoveredTold).toEqual([['r-lost', false]]);
    expect(info).toEqual([['fhirgate took over the unfinished replies of a lost instance', { replies: 2 }]]);
    // The sweeps that found nothing said nothing.
    const claims = registry.claims;
    await until(() => registry.claims > claims + 2, 2000);
    expect(info).toHaveLength(1);
  });

  test('a sweep answers how many turns it took; one the store cannot write yet stays in the outbox and is written by the drain', async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-later', status: 'completed' }, { assignedId: true });
    const registry = new LostInstances(60_000);
    const subject = start(ReplyJournal.open(root), { registry: registry.asRegistry(), retryDelaysMs: [], drainDelayMs: 60_000 });
    await expect(subject.sweep()).resolves.toBe(0);
    registry.lost = leftUnfinished('lost', [['r-now', 'prompt-later', 'Taken over at once']]);
    await expect(subject.sweep()).resolves.toBe(1);
    // Written by the sweep itself, not by a drain a minute later.
    expect(await repo.readResource('Communication', 'r-now')).toMatchObject({ status: 'stopped', payload: [{ contentString: 'Taken over at once' }] });

    const later = start(ReplyJournal.open(join(root, 'later')), { registry: registry.asRegistry(), retryDelaysMs: [] });
    registry.lost = leftUnfinished('lost-later', [['r-later', 'prompt-later', 'Taken over']]);
    repo.failures = Number.POSITIVE_INFINITY;
    await expect(later.sweep()).resolves.toBe(1);
    expect(later.pending).toBe(1);
    repo.failures = 0;
    await until(() => later.pending === 0, 2000);
    expect(await repo.readResource('Communication', 'r-later')).toMatchObject({ status: 'stopped', payload: [{ contentString: 'Taken over' }] });
  });

  test('without a turn registry a sweep takes nothing; recovered replies are written whether or not the budgets listen', async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-unheard', status: 'completed' }, { assignedId: true });
    leftUnfinished('unheard', [['r-unheard', 'prompt-unheard', 'No one counts this']]);
    const { logger, warn } = keptLines();
    const subject = start(ReplyJournal.open(join(root, 'unheard')), { logger, onRecovered: undefined });
    await expect(subject.sweep()).resolves.toBe(0);
    await expect(subject.recover()).resolves.toEqual({ recovered: 1, pending: 0 });
    expect(await repo.readResource('Communication', 'r-unheard')).toMatchObject({ payload: [{ contentString: 'No one counts this' }] });
    expect(warn).toEqual([]);
    expect(repo.creates).toBe(2);
  });

  test('turns taken over while a round of the outbox is under way are written by a round of their own', async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-race', status: 'completed' }, { assignedId: true });
    for (const takeOver of ['sweep', 'adopted'] as const) {
      const folder = `race-${takeOver}`;
      leftUnfinished(folder, [[`r-recovered-${takeOver}`, 'prompt-race', 'Recovered at start']]);
      let release: () => void = () => undefined;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const { journal, adopt } = adoptingJournal(join(root, folder));
      const registry = new LostInstances(60_000);
      const subject = start(journal, {
        registry: registry.asRegistry(),
        // The start-up round waits on the store; the turns arrive meanwhile.
        systemRepo: async () => {
          await held;
          return repo;
        },
      });
      const recovering = subject.recover();
      const taken = leftUnfinished(`${folder}-taken`, [[`r-taken-${takeOver}`, 'prompt-race', 'Taken over meanwhile']]);
      if (takeOver === 'sweep') {
        registry.lost = taken;
        const sweeping = subject.sweep();
        release();
        await sweeping;
      } else {
        adopt(taken);
        release();
      }
      await recovering;
      await until(() => subject.pending === 0, 2000);
      expect(await repo.readResource('Communication', `r-taken-${takeOver}`)).toMatchObject({ payload: [{ contentString: 'Taken over meanwhile' }] });
    }
  });

  test("a journal taken over while this process runs is written at once, not at the drain's next round", async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-at-once', status: 'completed' }, { assignedId: true });
    const { journal, adopt } = adoptingJournal(root);
    start(journal, { drainDelayMs: 60_000 });
    adopt(leftUnfinished('stopped', [['r-at-once', 'prompt-at-once', 'At once']]));
    await until(() => recoveredTold.length > 0, 2000);
    expect(await repo.readResource('Communication', 'r-at-once')).toMatchObject({ payload: [{ contentString: 'At once' }] });
  });

  test('after close() no sweep runs, and neither the sweep nor the drain keeps the process running', async () => {
    const registry = new LostInstances(10);
    const held = timersHeld();
    const subject = start(ReplyJournal.open(root), { registry: registry.asRegistry(), retryDelaysMs: [], drainDelayMs: 60_000 });
    repo.failures = Number.POSITIVE_INFINITY;
    await subject.record('project-1', reply('r-waiting', 'x'));
    // The sweep's interval and the drain's timer are both set, and neither holds the process.
    expect(timersHeld()).toBe(held);
    await until(() => registry.claims > 0, 2000);
    await subject.close();
    const claims = registry.claims;
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(registry.claims).toBe(claims);
  });

  test("a journal taken over while this process runs (its writer's lease expired) has its turns recorded at once, and none after close()", async () => {
    await repo.createResource({ resourceType: 'Communication', id: 'prompt-adopted', status: 'completed' }, { assignedId: true });
    const { journal, adopt } = adoptingJournal(root);
    const { logger, info } = keptLines();
    const subject = start(journal, { logger, retryDelaysMs: [] });
    repo.failures = Number.POSITIVE_INFINITY;
    adopt(leftUnfinished('stopped', [['r-adopted', 'prompt-adopted', 'Cut off']]));
    await until(() => info.length > 0, 2000);
    expect(info).toEqual([['fhirgate took over the reply journal of a stopped instance', { replies: 1 }]]);
    // The store was down: kept, and written by the drain once it is back.
    expect(subject.pending).toBe(1);
    repo.failures = 0;
    await until(() => subject.pending === 0, 2000);
    expect(await repo.readResource('Communication', 'r-adopted')).toMatchObject({
      status: 'stopped',
      statusReason: { text: RECOVERED_REASON },
      payload: [{ contentString: 'Cut off' }],
    });
    expect(recoveredTold).toEqual([['r-adopted', false]]);

    await subject.close();
    adopt(leftUnfinished('stopped-later', [['r-after-close', 'prompt-adopted', 'Too late']]));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(subject.pending).toBe(0);
    await expect(repo.readResource('Communication', 'r-after-close')).rejects.toThrow('Not found');
    expect(info).toHaveLength(1);
  });

  test('what is still in the outbox at close is written by the next start', async () => {
    const first = start(ReplyJournal.open(root));
    first.open(openTurn('r4', 'p'));
    repo.failures = Number.POSITIVE_INFINITY;
    await first.record('project-1', reply('r4', 'later'));
    await first.close();
    repo.failures = 0;

    const next = start(ReplyJournal.open(root));
    await expect(next.recover()).resolves.toEqual({ recovered: 1, pending: 0 });
    expect(await repo.readResource('Communication', 'r4')).toMatchObject({ status: 'completed', payload: [{ contentString: 'later' }] });
    // Its process had counted it when it recorded it.
    expect(recoveredTold).toEqual([['r4', true]]);
  });
});
