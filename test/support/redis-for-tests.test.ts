/**
 * `npm test` on a machine with `redis-server` and no REDIS_URL runs the tests that need Redis against one of its
 * own (jest.config.js's global setup), and stops it afterwards; with REDIS_URL set it starts nothing.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import startRedisForTests, { stopRedisForTests } from './redis-for-tests.ts';
import { describeWithRedisServer } from './redis.ts';

const given = process.env.REDIS_URL;

afterEach(async () => {
  await stopRedisForTests();
  if (given === undefined) {
    delete process.env.REDIS_URL;
  } else {
    process.env.REDIS_URL = given;
  }
});

describeWithRedisServer('the suite’s own Redis', () => {
  it('is started when REDIS_URL is unset, answers on the URL it gives, and is gone after the teardown', async () => {
    delete process.env.REDIS_URL;
    await startRedisForTests();
    const url = process.env.REDIS_URL;
    expect(url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    const client = new Redis(url!, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    await client.connect();
    await expect(client.ping()).resolves.toBe('PONG');
    client.disconnect();

    await stopRedisForTests();
    expect(process.env.REDIS_URL).toBeUndefined();
    const after = new Redis(url!, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    after.on('error', () => undefined);
    await expect(after.connect()).rejects.toThrow();
    after.disconnect();
  });

  it('is not started when REDIS_URL is set: the tests use that Redis', async () => {
    process.env.REDIS_URL = 'redis://127.0.0.1:1';
    await startRedisForTests();
    expect(process.env.REDIS_URL).toBe('redis://127.0.0.1:1');
    await stopRedisForTests();
    expect(process.env.REDIS_URL).toBe('redis://127.0.0.1:1');
  });
});
