import { afterEach, beforeEach, expect, jest, test } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { describeWithRedisServer } from '../../../test/support/redis.ts';
import { startOwnRedis, type OwnRedis } from '../../../test/support/own-redis.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import type { HostLogger } from '../../host.ts';
import { connectStandaloneRedis } from './redis-client.ts';

describeWithRedisServer("the standalone host's Redis client", () => {
  let redis: OwnRedis;
  let client: Redis | undefined;
  const lines: { level: string; message: string }[] = [];
  const logger: HostLogger = {
    debug: (message) => lines.push({ level: 'debug', message }),
    info: (message) => lines.push({ level: 'info', message }),
    warn: (message) => lines.push({ level: 'warn', message }),
    error: (message) => lines.push({ level: 'error', message }),
  };

  beforeEach(async () => {
    lines.length = 0;
    redis = await startOwnRedis();
  });

  afterEach(async () => {
    client?.disconnect();
    await redis.stop();
  });

  test('a Redis that dies and comes back: one warning, one line when it is back, no ioredis stack traces', async () => {
    const consoleError = jest.spyOn(console, 'error');
    try {
      client = connectStandaloneRedis(redis.url, logger);
      expect(await client.ping()).toBe('PONG');

      await redis.kill();
      // ioredis tries again and again meanwhile, failing each time.
      await sleep(1500);
      expect(lines.map((line) => line.level)).toEqual(['warn']);
      expect(lines[0]?.message).toContain('reconnecting in the background');

      await redis.restart();
      await waitFor(async () => (lines.some((line) => line.level === 'info') ? true : undefined), 10_000);
      expect(await client.ping()).toBe('PONG');
      expect(lines.map((line) => line.level)).toEqual(['warn', 'info']);
      expect(lines[1]?.message).toBe('Redis connection restored');
      expect(consoleError.mock.calls.filter((call) => String(call[0]).includes('[ioredis]'))).toEqual([]);
    } finally {
      consoleError.mockRestore();
    }
  });

  test('a deliberate quit logs nothing', async () => {
    client = connectStandaloneRedis(redis.url, logger);
    await client.ping();
    await client.quit();
    await sleep(200);
    expect(lines).toEqual([]);
  });
});
