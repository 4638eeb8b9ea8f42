/**
 * Jest's global setup and teardown (jest.config.js): the tests that need Redis run on a laptop too. With
 * REDIS_URL unset and `redis-server` installed, `npm test` starts one of its own on a free loopback port, without
 * persistence, and gives every test file its URL; the teardown stops it. With REDIS_URL set (`.ci/run` sets it),
 * that Redis is used and nothing is started; with neither, those tests are skipped with a notice (redis.ts).
 */
import { hasRedisServer, startOwnRedis, type OwnRedis } from './own-redis.ts';

const started = Symbol.for('fhirgate.testRedis');
type WithStarted = typeof globalThis & { [started]?: OwnRedis };

/** Global setup: runs once, before the test files; the worker processes started after it inherit REDIS_URL. */
export default async function startRedisForTests(): Promise<void> {
  if (process.env.REDIS_URL || !hasRedisServer()) {
    return;
  }
  const redis = await startOwnRedis();
  (globalThis as WithStarted)[started] = redis;
  process.env.REDIS_URL = redis.url;
  console.log(`\nThe tests that need Redis use a redis-server of their own on ${redis.url} (REDIS_URL was not set).`);
}

/** Global teardown: stops the redis-server the setup started, if it started one. */
export async function stopRedisForTests(): Promise<void> {
  const redis = (globalThis as WithStarted)[started];
  if (redis) {
    delete (globalThis as WithStarted)[started];
    delete process.env.REDIS_URL;
    await redis.stop();
  }
}
