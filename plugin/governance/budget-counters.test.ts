import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { connectTestRedis, describeWithRedis, describeWithRedisServer } from '../../test/support/redis.ts';
import { startOwnRedis, type OwnRedis } from '../../test/support/own-redis.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import type { HostLogger } from '../host.ts';
import { periodsAt } from './budget-periods.ts';
import { BudgetCounters, type BudgetCountersOptions } from './budget-counters.ts';
import type { BudgetSeeder, RecordedSpend, SeedWindow } from './budget-seed.ts';

// Redis forgets a period's counters a week after it ends: the tests count in today's.
const TODAY = periodsAt(Date.now());
const NOTHING = { projectTokens: 0, projectCost: 0, userTokens: 0, userCost: 0 };

/** A clock the test moves. */
function testClock(): { now: () => number; advance: (milliseconds: number) => void } {
  let now = Date.now();
  return { now: () => now, advance: (milliseconds) => (now += milliseconds) };
}

function counters(options: Partial<BudgetCountersOptions> & { keyPrefix: string }): BudgetCounters {
  return new BudgetCounters({ refreshMs: 1000, maxAgeMs: 5000, ...options });
}

function spendOf(project: number, users: Record<string, number>): RecordedSpend {
  return { project: { tokens: project, cost: 0 }, users: new Map(Object.entries(users).map(([user, tokens]) => [user, { tokens, cost: 0 }])) };
}

/** A seeder that answers `answer` for each window and remembers what it was asked. */
function recordingSeeder(answer: (window: SeedWindow) => RecordedSpend, unfinished: string[] = []): BudgetSeeder & { readonly asked: SeedWindow[][] } {
  const asked: SeedWindow[][] = [];
  const seeder = async (_projectId: string, windows: readonly SeedWindow[]) => {
    asked.push([...windows]);
    return { windows: windows.map(answer), unfinished: new Set(unfinished) };
  };
  return Object.assign(seeder, { asked });
}

describe('budget counters without Redis', () => {
  test("count in memory: the project's and each user's spend, per day and month", async () => {
    const today = periodsAt(Date.parse('2026-05-12T10:00:00Z'));
    const tomorrow = periodsAt(Date.parse('2026-05-13T10:00:00Z'));
    const memory = counters({ keyPrefix: 'unused:', now: () => Date.parse('2026-05-13T10:00:00Z') });
    memory.add('project-a', 'Practitioner/1', today, 100, 2000);
    memory.add('project-a', 'Practitioner/2', today, 50, 0);
    memory.add('project-a', 'Practitioner/1', tomorrow, 7, 1);

    expect(await memory.spend('project-a', 'Practitioner/1', today)).toEqual({
      day: { projectTokens: 150, projectCost: 2000, userTokens: 100, userCost: 2000 },
      month: { projectTokens: 157, projectCost: 2001, userTokens: 107, userCost: 2001 },
      held: NOTHING,
    });
    expect(await memory.spend('project-a', 'Practitioner/2', tomorrow)).toEqual({
      day: { projectTokens: 7, projectCost: 1, userTokens: 0, userCost: 0 },
      month: { projectTokens: 157, projectCost: 2001, userTokens: 50, userCost: 0 },
      held: NOTHING,
    });
    expect((await memory.spend('project-b', 'Practitioner/1', today)).month.projectTokens).toBe(0);
  });

  test("what turns still running hold is in the view, the project's and the user's, until given back (once)", async () => {
    const memory = counters({ keyPrefix: 'unused:' });
    const first = memory.hold('p', 'Practitioner/1', { tokens: 30, cost: 7 });
    memory.hold('p', 'Practitioner/2', { tokens: 5, cost: 0 });
    expect((await memory.spend('p', 'Practitioner/1', TODAY)).held).toEqual({ projectTokens: 35, projectCost: 7, userTokens: 30, userCost: 7 });
    first();
    first();
    expect(memory.view('p', 'Practitioner/1', TODAY).held).toEqual({ projectTokens: 5, projectCost: 0, userTokens: 0, userCost: 0 });
  });

  test("a project's counters start from its stored replies, read once at its first check; replies before it are the seed's", async () => {
    const now = Date.parse('2026-05-12T10:00:00Z');
    const periods = periodsAt(now);
    const seeder = recordingSeeder((window) => (window.from === Date.parse('2026-05-01T00:00:00Z') ? spendOf(100, { 'Practitioner/1': 60 }) : spendOf(40, { 'Practitioner/1': 20 })));
    const memory = counters({ keyPrefix: 'unused:', seeder, now: () => now });
    // Recorded before the project's first check: the seed reads it from the store, so it is not counted twice.
    memory.add('p', 'Practitioner/1', periods, 999, 0);

    expect(await memory.spend('p', 'Practitioner/1', periods)).toEqual({
      day: { projectTokens: 40, projectCost: 0, userTokens: 20, userCost: 0 },
      month: { projectTokens: 100, projectCost: 0, userTokens: 60, userCost: 0 },
      held: NOTHING,
    });
    expect(seeder.asked).toEqual([
      [
        { from: Date.parse('2026-05-01T00:00:00Z'), to: now },
        { from: Date.parse('2026-05-12T00:00:00Z'), to: now },
      ],
    ]);
    memory.add('p', 'Practitioner/1', periods, 5, 0);
    expect((await memory.spend('p', 'Practitioner/2', periods)).day).toEqual({ projectTokens: 45, projectCost: 0, userTokens: 0, userCost: 0 });
    expect(seeder.asked).toHaveLength(1);
  });

  test('a seed the store cannot give is a 503 for the check, and is read again at the next', async () => {
    let fails = true;
    const seeder: BudgetSeeder = async (_projectId, windows) => {
      if (fails) {
        throw new Error('the store is down');
      }
      return { windows: windows.map(() => spendOf(12, { 'Practitioner/1': 12 })), unfinished: new Set() };
    };
    const memory = counters({ keyPrefix: 'unused:', seeder });
    await expect(memory.spend('p', 'Practitioner/1', TODAY)).rejects.toMatchObject({ code: 'unavailable', status: 503, retryAfterSeconds: 1 });
    fails = false;
    expect((await memory.spend('p', 'Practitioner/1', TODAY)).day.userTokens).toBe(12);
  });

  test('a reply a recovery wrote counts once: not when the seed read it, nor before the seed (it will)', async () => {
    let finishSeed: () => void = () => undefined;
    const seeded = new Promise<void>((resolve) => {
      finishSeed = resolve;
    });
    const seeder: BudgetSeeder = async (_projectId, windows) => {
      await seeded;
      // The seed read `seen` (a stopped reply), not `unseen`, which the recovery wrote after the search.
      return { windows: windows.map(() => spendOf(10, { 'Practitioner/1': 10 })), unfinished: new Set(['seen']) };
    };
    const memory = counters({ keyPrefix: 'unused:', seeder });
    const recovered = (replyId: string, projectId = 'p'): void =>
      memory.addRecovered(projectId, 'Practitioner/1', TODAY, { tokens: 3, cost: 0, replyId, sent: Date.now(), counted: false });
    recovered('before any seed', 'q');
    const reading = memory.spend('p', 'Practitioner/1', TODAY);
    recovered('seen');
    recovered('unseen');
    finishSeed();
    expect((await reading).day.userTokens).toBe(10 + 3);
    recovered('seen');
    recovered('later');
    expect(memory.view('p', 'Practitioner/1', TODAY).day.userTokens).toBe(10 + 3 + 3);
    expect((await counters({ keyPrefix: 'unused:' }).spend('q', 'Practitioner/1', TODAY)).day.userTokens).toBe(0);
  });
});

describeWithRedis('budget counters on a shared Redis', () => {
  let first: Redis;
  let second: Redis;

  beforeEach(async () => {
    first = connectTestRedis();
    second = connectTestRedis();
    await Promise.all([first.ping(), second.ping()]);
  });

  afterEach(async () => {
    await Promise.all([first.quit(), second.quit()]);
  });

  test("one instance's spend is in the other's view: at once when it has none, within maxAgeMs when it has one", async () => {
    const keyPrefix = `fhirgate:test:${randomUUID()}:`;
    const clock = testClock();
    const one = counters({ redis: first, keyPrefix, now: clock.now });
    const other = counters({ redis: second, keyPrefix, now: clock.now });
    expect((await other.spend('p', 'Practitioner/1', TODAY)).day.userTokens).toBe(0);

    one.add('p', 'Practitioner/1', TODAY, 300, 40);
    // This instance sees its own spend at once, before Redis answers.
    expect((await one.spend('p', 'Practitioner/1', TODAY)).day).toEqual({ projectTokens: 300, projectCost: 40, userTokens: 300, userCost: 40 });
    // Another user's first view is read from Redis: the project's spend is in it.
    await waitFor(async () => ((await other.spend('p', 'Practitioner/2', TODAY)).day.projectTokens === 300 ? true : undefined));

    // Practitioner/1's view on the other instance is younger than maxAgeMs: read again only in the background.
    clock.advance(2000);
    await other.spend('p', 'Practitioner/1', TODAY);
    await waitFor(async () => ((await other.spend('p', 'Practitioner/1', TODAY)).month.userTokens === 300 ? true : undefined));
    expect((await other.spend('p', 'Practitioner/1', TODAY)).month).toEqual({ projectTokens: 300, projectCost: 40, userTokens: 300, userCost: 40 });

    // Kept per project and period in Redis, where an operator can look.
    const dayKey = `${keyPrefix}budget:{p}:day:${TODAY.day.key}`;
    // `from`: the hash counts from the first addition, until it is seeded from the stored replies (these counters have no seeder).
    expect(await first.hgetall(dayKey)).toEqual({ tokens: '300', cost: '40', 'tokens:Practitioner/1': '300', 'cost:Practitioner/1': '40', from: expect.stringMatching(/^\d+$/) });
    expect(await first.pttl(dayKey)).toBeGreaterThan(0);
    one.close();
    other.close();
  });

  test("what one instance holds for its turns is in the other's view once read, and gone once it stops renewing it (it died)", async () => {
    const keyPrefix = `fhirgate:test:${randomUUID()}:`;
    const one = counters({ redis: first, keyPrefix, holdTtlMs: 600 });
    const other = counters({ redis: second, keyPrefix, refreshMs: 0, maxAgeMs: 0 });
    const giveBack = one.hold('p', 'Practitioner/1', { tokens: 50, cost: 9 });
    one.hold('p', 'Practitioner/2', { tokens: 7, cost: 0 });
    await waitFor(async () => ((await other.spend('p', 'Practitioner/1', TODAY)).held.userTokens === 50 ? true : undefined));
    expect((await other.spend('p', 'Practitioner/1', TODAY)).held).toEqual({ projectTokens: 57, projectCost: 9, userTokens: 50, userCost: 9 });
    // Its own holdings are in its own view at once, and not counted twice.
    expect((await one.spend('p', 'Practitioner/1', TODAY)).held).toEqual({ projectTokens: 57, projectCost: 9, userTokens: 50, userCost: 9 });

    giveBack();
    await waitFor(async () => ((await other.spend('p', 'Practitioner/1', TODAY)).held.projectTokens === 7 ? true : undefined));
    // The instance stops renewing (as one that died): what it held expires within its TTL.
    one.close();
    // Its holdings hash expires by Redis's clock and its entry in the holders set by the reader's: either may go a
    // moment before the other, and both go.
    const gone = async (): Promise<true | undefined> =>
      (await other.spend('p', 'Practitioner/2', TODAY)).held.projectTokens === 0 && (await first.zcard(`${keyPrefix}budget:{p}:holders`)) === 0 ? true : undefined;
    await waitFor(gone, 3000);
    expect(await first.zcard(`${keyPrefix}budget:{p}:holders`)).toBe(0);
    other.close();
  });

  test('a period hash Redis lost is seeded from the stored replies, once; what was added since is not counted twice', async () => {
    const keyPrefix = `fhirgate:test:${randomUUID()}:`;
    const seeder = recordingSeeder(() => spendOf(100, { 'Practitioner/1': 100 }));
    const one = counters({ redis: first, keyPrefix, seeder });
    const other = counters({ redis: second, keyPrefix, seeder, refreshMs: 0, maxAgeMs: 0 });
    const dayKey = `${keyPrefix}budget:{p}:day:${TODAY.day.key}`;
    const monthKey = `${keyPrefix}budget:{p}:month:${TODAY.month.key}`;

    // A reply recorded before anything read the hashes: they count from its `sent`, and the seed up to it.
    const sent = Date.now();
    one.add('p', 'Practitioner/1', TODAY, 10, 0, sent);
    await waitFor(async () => ((await first.hget(dayKey, 'tokens')) === '10' ? true : undefined));
    expect((await other.spend('p', 'Practitioner/1', TODAY)).day).toEqual({ projectTokens: 110, projectCost: 0, userTokens: 110, userCost: 0 });
    expect(seeder.asked.at(-1)?.map((window) => window.to)).toEqual([sent, sent]);
    expect(await first.hget(dayKey, 'seeded')).toBe('1');
    expect(await first.hexists(monthKey, 'from')).toBe(0);

    // Redis restarts without its data: the next read seeds the hashes again, up to now.
    const asked = seeder.asked.length;
    await first.del(dayKey, monthKey);
    expect((await other.spend('p', 'Practitioner/1', TODAY)).month.userTokens).toBe(100);
    expect(seeder.asked).toHaveLength(asked + 1);
    expect((await other.spend('p', 'Practitioner/1', TODAY)).month.userTokens).toBe(100);
    expect(seeder.asked).toHaveLength(asked + 1);
    one.close();
    other.close();
  });

  test('a view older than maxAgeMs is read before it is used', async () => {
    const keyPrefix = `fhirgate:test:${randomUUID()}:`;
    const clock = testClock();
    const one = counters({ redis: first, keyPrefix, now: clock.now });
    const other = counters({ redis: second, keyPrefix, now: clock.now, refreshMs: 60_000, maxAgeMs: 60_000 });
    expect((await other.spend('p', 'Practitioner/1', TODAY)).day.projectTokens).toBe(0);
    one.add('p', 'Practitioner/9', TODAY, 25, 0);
    await waitFor(async () => ((await one.spend('p', 'Practitioner/9', TODAY)).day.projectTokens === 25 && (await first.exists(`${keyPrefix}budget:{p}:day:${TODAY.day.key}`)) ? true : undefined));

    expect((await other.spend('p', 'Practitioner/1', TODAY)).day.projectTokens).toBe(0);
    clock.advance(60_001);
    expect((await other.spend('p', 'Practitioner/1', TODAY)).day.projectTokens).toBe(25);
    one.close();
    other.close();
  });
});

describeWithRedisServer('budget counters when their Redis hangs', () => {
  let redis: OwnRedis;
  let client: Redis;
  let otherInstance: Redis;

  beforeEach(async () => {
    redis = await startOwnRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    otherInstance = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    otherInstance.on('error', () => undefined);
    await Promise.all([client.ping(), otherInstance.ping()]);
  });

  afterEach(async () => {
    client.disconnect();
    otherInstance.disconnect();
    await redis.stop();
  });

  test('paused: spend counts in memory, a check waits at most the deadline; resumed: every addition reaches Redis once', async () => {
    const warnings: string[] = [];
    const logger: HostLogger = { debug: () => undefined, info: () => undefined, warn: (message) => warnings.push(message), error: () => undefined };
    const keyPrefix = `fhirgate:test:${randomUUID()}:`;
    const clock = testClock();
    const one = counters({ redis: client, keyPrefix, deadlineMs: 100, probeIntervalMs: 100, refreshMs: 0, maxAgeMs: 0, logger, now: clock.now });
    const dayKey = `${keyPrefix}budget:{p}:day:${TODAY.day.key}`;
    one.add('p', 'Practitioner/1', TODAY, 10, 0);
    await waitFor(async () => ((await otherInstance.hget(dayKey, 'tokens')) === '10' ? true : undefined));

    redis.pause();
    // This addition's call misses its deadline (Redis applies it once it resumes), and so does the read before
    // the check (maxAgeMs 0): from then on, nothing is asked of Redis.
    one.add('p', 'Practitioner/1', TODAY, 5, 0);
    clock.advance(1);
    expect((await one.spend('p', 'Practitioner/1', TODAY)).day.userTokens).toBe(15);
    expect(one.shared).toBe(false);
    one.add('p', 'Practitioner/1', TODAY, 7, 0);
    clock.advance(1);
    expect((await one.spend('p', 'Practitioner/1', TODAY)).day.userTokens).toBe(22);
    expect(warnings).toEqual(["fhirgate: Redis did not answer; budget counters count in this instance's memory until it does"]);

    redis.resume();
    await waitFor(async () => (one.shared ? true : undefined));
    // The next addition sends those that waited along; the one Redis applied late is not counted twice.
    one.add('p', 'Practitioner/1', TODAY, 1, 0);
    await waitFor(async () => ((await otherInstance.hget(dayKey, 'tokens')) === '23' ? true : undefined));
    clock.advance(1);
    expect((await one.spend('p', 'Practitioner/1', TODAY)).day).toEqual({ projectTokens: 23, projectCost: 0, userTokens: 23, userCost: 0 });
    one.close();
  });
});
