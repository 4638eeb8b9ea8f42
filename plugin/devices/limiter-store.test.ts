import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { connectTestRedis, describeWithRedis, describeWithRedisServer } from '../../test/support/redis.ts';
import { startOwnRedis, type OwnRedis } from '../../test/support/own-redis.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import type { HostLogger } from '../host.ts';
import { createLimiterStore, type Limit } from './limiter-store.ts';

interface RecordingLogger extends HostLogger {
  readonly lines: { level: string; message: string; data?: Record<string, unknown> }[];
  count(level: string): number;
}

function recordingLogger(): RecordingLogger {
  const lines: RecordingLogger['lines'] = [];
  const log = (level: string) => (message: string, data?: Record<string, unknown>) => {
    lines.push({ level, message, data });
  };
  return { lines, count: (level) => lines.filter((line) => line.level === level).length, debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}

/** A client as a Medplum server or the standalone host makes it: reconnecting, with an offline queue, no command timeout. */
function hostLikeClient(url: string): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  return client;
}

/** Whether each of `times` calls passed (true) or was refused over the limit (false); throws on anything else. */
async function consumeTimes(limit: Limit, key: string, times: number): Promise<boolean[]> {
  const outcomes: boolean[] = [];
  for (let count = 0; count < times; count++) {
    try {
      await limit.consume(key);
      outcomes.push(true);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) {
        throw rejection;
      }
      outcomes.push(false);
    }
  }
  return outcomes;
}

function newLimit(store: ReturnType<typeof createLimiterStore>, prefix: string, points = 3): Limit {
  return store.limit({ keyPrefix: prefix, points, durationSeconds: 30 });
}

describe('createLimiterStore without Redis', () => {
  test('counts in memory: points pass, then refusals', async () => {
    const store = createLimiterStore(undefined);
    expect(store.guard).toBeUndefined();
    expect(await consumeTimes(newLimit(store, `t:${randomUUID()}`), 'key', 4)).toEqual([true, true, true, false]);
  });

  test("get reads a key's count without counting: none, then past the points while refused", async () => {
    const limit = createLimiterStore(undefined).limit({ keyPrefix: `t:${randomUUID()}`, points: 2, durationSeconds: 30, blockSeconds: 60 });
    expect(await limit.get('key')).toBeNull();
    await consumeTimes(limit, 'key', 3);
    const count = await limit.get('key');
    expect(count?.consumedPoints).toBeGreaterThan(2);
    expect(count?.msBeforeNext).toBeGreaterThan(30_000);
    expect((await limit.get('key'))?.consumedPoints).toBe(count?.consumedPoints);
  });
});

describeWithRedis('createLimiterStore on Redis', () => {
  test('get reads the count another instance made, without counting', async () => {
    const [first, second] = [connectTestRedis(), connectTestRedis()];
    try {
      await Promise.all([first.ping(), second.ping()]);
      const prefix = `t:${randomUUID()}`;
      const counted = createLimiterStore(first).limit({ keyPrefix: prefix, points: 2, durationSeconds: 30, blockSeconds: 60 });
      const read = createLimiterStore(second).limit({ keyPrefix: prefix, points: 2, durationSeconds: 30, blockSeconds: 60 });
      expect(await read.get('key')).toBeNull();
      await consumeTimes(counted, 'key', 3);
      expect((await read.get('key'))?.consumedPoints).toBeGreaterThan(2);
      expect((await read.get('key'))?.msBeforeNext).toBeGreaterThan(30_000);
    } finally {
      await Promise.all([first.quit(), second.quit()]);
    }
  });
});

describeWithRedisServer('createLimiterStore when its Redis hangs or dies', () => {
  let redis: OwnRedis;
  let client: Redis;
  let otherInstance: Redis;

  beforeEach(async () => {
    redis = await startOwnRedis();
    client = hostLikeClient(redis.url);
    otherInstance = hostLikeClient(redis.url);
    await Promise.all([client.ping(), otherInstance.ping()]);
  });

  afterEach(async () => {
    client.disconnect();
    otherInstance.disconnect();
    await redis.stop();
  });

  test('paused: calls are answered from memory within the deadline, limits hold, one warning; resumed: shared again, one info', async () => {
    const logger = recordingLogger();
    const store = createLimiterStore(client, { logger, deadlineMs: 100, probeIntervalMs: 200 });
    const prefix = `t:${randomUUID()}`;
    const limit = newLimit(store, prefix);
    expect(await consumeTimes(limit, 'before', 1)).toEqual([true]);

    redis.pause();
    const started = performance.now();
    // The first call meets the deadline; the rest go straight to memory, where the count starts afresh.
    expect(await consumeTimes(limit, 'paused', 4)).toEqual([true, true, true, false]);
    expect(await consumeTimes(limit, 'paused-too', 20)).toEqual([true, true, true, ...Array<boolean>(17).fill(false)]);
    // Generous: the pause lasts until the test resumes it, and ioredis alone would wait for it.
    expect(performance.now() - started).toBeLessThan(2000);
    expect(store.guard?.available).toBe(false);
    expect(logger.count('warn')).toBe(1);
    expect(logger.lines[0]?.message).toContain('Redis did not answer');

    redis.resume();
    await waitFor(async () => (store.guard?.available ? true : undefined), 5000);
    expect(logger.count('info')).toBe(1);
    expect(logger.count('warn')).toBe(1);
    // Counted on Redis again: another instance's limiter sees this one's count.
    expect(await consumeTimes(limit, 'after', 2)).toEqual([true, true]);
    expect(await consumeTimes(newLimit(createLimiterStore(otherInstance), prefix), 'after', 2)).toEqual([true, false]);
  });

  test('killed: calls are answered from memory at once; started again on the same port: shared again without a restart of fhirgate', async () => {
    const logger = recordingLogger();
    const store = createLimiterStore(client, { logger, deadlineMs: 100, probeIntervalMs: 200 });
    const prefix = `t:${randomUUID()}`;
    const limit = newLimit(store, prefix);
    expect(await consumeTimes(limit, 'before', 1)).toEqual([true]);

    await redis.kill();
    const started = performance.now();
    expect(await consumeTimes(limit, 'killed', 4)).toEqual([true, true, true, false]);
    // ioredis alone waits up to its connect timeout (10 s) per call.
    expect(performance.now() - started).toBeLessThan(2000);
    expect(store.guard?.available).toBe(false);

    await redis.restart();
    await waitFor(async () => (store.guard?.available ? true : undefined), 10_000);
    expect(logger.count('warn')).toBe(1);
    expect(logger.count('info')).toBe(1);
    expect(await consumeTimes(limit, 'after', 2)).toEqual([true, true]);
    // The other instance's client reconnects on its own schedule; until it is ready its limiter counts in memory.
    await waitFor(async () => (otherInstance.status === 'ready' ? true : undefined), 10_000);
    expect(await consumeTimes(newLimit(createLimiterStore(otherInstance), prefix), 'after', 2)).toEqual([true, false]);
  });

  test('a fault after a recovery is logged again: one line per change, not per call', async () => {
    const logger = recordingLogger();
    const store = createLimiterStore(client, { logger, deadlineMs: 100, probeIntervalMs: 100 });
    const limit = newLimit(store, `t:${randomUUID()}`, 1000);
    for (let round = 0; round < 2; round++) {
      redis.pause();
      await consumeTimes(limit, 'key', 30);
      redis.resume();
      await waitFor(async () => {
        await consumeTimes(limit, 'key', 1);
        return store.guard?.available ? true : undefined;
      }, 5000);
    }
    expect(logger.lines.map((line) => line.level)).toEqual(['warn', 'info', 'warn', 'info']);
  });
});

describe('createLimiterStore when Redis is unreachable from the start', () => {
  let unreachableClient: Redis;

  beforeAll(async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    unreachableClient = hostLikeClient(`redis://127.0.0.1:${typeof address === 'object' && address ? address.port : 1}`);
  });

  afterAll(() => {
    unreachableClient.disconnect();
  });

  test('keeps limiting in memory instead of throwing, waiting or letting every call through', async () => {
    const store = createLimiterStore(unreachableClient, { deadlineMs: 100 });
    const limit = newLimit(store, `t:${randomUUID()}`);
    const started = performance.now();
    expect(await consumeTimes(limit, 'a', 4)).toEqual([true, true, true, false]);
    expect(await consumeTimes(limit, 'b', 3)).toEqual([true, true, true]);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(store.guard?.available).toBe(false);
  });
});
