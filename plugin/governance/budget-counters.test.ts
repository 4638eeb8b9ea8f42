import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { connectTestRedis, describeWithRedis, describeWithRedisServer } from '../../test/support/redis.ts';
import { startOwnRedis, type OwnRedis } from '../../test/support/own-redis.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import type { HostLogger } from '../host.ts';
import { periodsAt } from './budget-periods.ts';
import { BudgetCounters, type BudgetCountersOptions } from './budget-counters.ts';

// Redis forgets a period's counters a week after it ends: the tests count in today's.
const TODAY = periodsAt(Date.now());

/** A clock the test moves. */
function testClock(): { now: () => number; advance: (milliseconds: number) => void } {
  let now = Date.now();
  return { now: () => now, advance: (milliseconds) => (now += milliseconds) };
}

function counters(options: Partial<BudgetCountersOptions> & { keyPrefix: string }): BudgetCounters {
  return new BudgetCounters({ refreshMs: 1000, maxAgeMs: 5000, ...options });
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
    });
    expect(await memory.spend('project-a', 'Practitioner/2', tomorrow)).toEqual({
      day: { projectTokens: 7, projectCost: 1, userTokens: 0, userCost: 0 },
      month: { projectTokens: 157, projectCost: 2001, userTokens: 50, userCost: 0 },
    });
    expect((await memory.spend('project-b', 'Practitioner/1', today)).month.projectTokens).toBe(0);
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
    expect(await first.hgetall(dayKey)).toEqual({ tokens: '300', cost: '40', 'tokens:Practitioner/1': '300', 'cost:Practitioner/1': '40' });
    expect(await first.pttl(dayKey)).toBeGreaterThan(0);
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
