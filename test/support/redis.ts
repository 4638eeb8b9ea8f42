/**
 * Tests that need a real Redis read REDIS_URL (`.ci/run` sets it). Without it they are skipped with a visible
 * notice, so `npm test` passes on a fresh machine.
 */
import { afterAll, beforeAll, describe } from '@jest/globals';
import { Redis } from 'ioredis';
import { hasRedisServer } from './own-redis.ts';

/** `describe` when REDIS_URL is set; otherwise a skipped block and a notice saying why. */
export function describeWithRedis(name: string, body: () => void): void {
  if (process.env.REDIS_URL) {
    describe(name, body);
    return;
  }
  console.warn(`Skipping "${name}": set REDIS_URL (e.g. redis://127.0.0.1:6379) to run the tests that need Redis.`);
  describe.skip(name, body);
}

/** A new client on REDIS_URL; the test closes it with `quit()`. */
export function connectTestRedis(): Redis {
  const url = process.env.REDIS_URL;
  if (!url) {
    throw new Error('REDIS_URL is not set');
  }
  return new Redis(url, { maxRetriesPerRequest: 1 });
}

/**
 * `describe` when `redis-server` can be run, for tests that start their own (own-redis.ts) to pause or kill it;
 * otherwise a skipped block and a notice saying why.
 */
export function describeWithRedisServer(name: string, body: () => void): void {
  if (hasRedisServer()) {
    describe(name, body);
    return;
  }
  console.warn(`Skipping "${name}": it starts its own redis-server, which is not installed here.`);
  describe.skip(name, body);
}

/** Two connected clients on REDIS_URL, standing for two server instances sharing one Redis. */
export interface TwoInstances {
  readonly first: Redis;
  readonly second: Redis;
}

/**
 * Connects two clients before the block's tests and closes them after it; call inside a `describeWithRedis` block.
 * The clients are read from the returned object once the tests run.
 */
export function twoInstancesOnRedis(): TwoInstances {
  const clients = {} as { first: Redis; second: Redis };
  beforeAll(async () => {
    clients.first = connectTestRedis();
    clients.second = connectTestRedis();
    await Promise.all([clients.first.ping(), clients.second.ping()]);
  });
  afterAll(async () => {
    await Promise.all([clients.first.quit(), clients.second.quit()]);
  });
  return clients;
}
