import { describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describeWithRedis, twoInstancesOnRedis } from '../../test/support/redis.ts';
import { AppError } from '../errors.ts';
import { createDeviceRateLimiter } from './device-rate-limiter.ts';
import type { DeviceRateLimiter } from './device-rate-limiter.ts';
import { createLimiterStore } from './limiter-store.ts';

const inMemory = () => createLimiterStore(undefined);
const onRedis = (client: Redis) => createLimiterStore(client);

/** A device id no other test or earlier run has used, so counters in a shared Redis never collide. */
function newDeviceId(): string {
  return `device-${randomUUID()}`;
}

async function consumeTimes(limiter: DeviceRateLimiter, deviceId: string, times: number): Promise<void> {
  for (let count = 0; count < times; count++) {
    await limiter.consume(deviceId);
  }
}

/** The AppError a refused request throws; fails the test if the request passes or fails otherwise. */
async function refusalOf(limiter: DeviceRateLimiter, deviceId: string): Promise<AppError> {
  try {
    await limiter.consume(deviceId);
  } catch (error) {
    if (AppError.isInstance(error)) {
      return error;
    }
    throw error;
  }
  throw new Error(`expected a request of ${deviceId} to be refused`);
}

describe('createDeviceRateLimiter in memory', () => {
  test('lets perSecond requests through, then refuses with rate_limited (429) and a retry delay', async () => {
    const limiter = createDeviceRateLimiter(10, inMemory());
    const deviceId = newDeviceId();
    await consumeTimes(limiter, deviceId, 10);

    const refusal = await refusalOf(limiter, deviceId);
    expect(refusal.code).toBe('rate_limited');
    expect(refusal.status).toBe(429);
    expect(refusal.isRetryable).toBe(true);
    expect(refusal.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refusal.message).toContain('10 per second');
  });

  test('a call of several units takes them all at once: they fit what is left, or the call is refused', async () => {
    const limiter = createDeviceRateLimiter(10, inMemory());
    const deviceId = newDeviceId();
    await limiter.consume(deviceId);
    await expect(limiter.consume(deviceId, 9)).resolves.toBeUndefined();
    expect((await refusalOf(limiter, deviceId)).code).toBe('rate_limited');

    const other = newDeviceId();
    await consumeTimes(limiter, other, 5);
    let refusal: unknown;
    await limiter.consume(other, 6).catch((error: unknown) => (refusal = error));
    expect(AppError.isInstance(refusal) && refusal.code === 'rate_limited' && refusal.status === 429).toBe(true);
    expect(limiter.perSecond).toBe(10);
  });

  test('one device using up its limit does not limit another device', async () => {
    const limiter = createDeviceRateLimiter(5, inMemory());
    const busyDevice = newDeviceId();
    const quietDevice = newDeviceId();
    await consumeTimes(limiter, busyDevice, 5);
    await refusalOf(limiter, busyDevice);

    await expect(consumeTimes(limiter, quietDevice, 5)).resolves.toBeUndefined();
    expect((await refusalOf(limiter, quietDevice)).code).toBe('rate_limited');
  });

  test('two limiters in one process do not share counters without Redis', async () => {
    const deviceId = newDeviceId();
    const first = createDeviceRateLimiter(2, inMemory());
    const second = createDeviceRateLimiter(2, inMemory());
    await consumeTimes(first, deviceId, 2);
    await expect(consumeTimes(second, deviceId, 2)).resolves.toBeUndefined();
  });

  test('requests pass again once the one-second window is over', async () => {
    const limiter = createDeviceRateLimiter(4, inMemory());
    const deviceId = newDeviceId();
    await consumeTimes(limiter, deviceId, 4);
    await refusalOf(limiter, deviceId);

    await sleep(1100);
    await expect(consumeTimes(limiter, deviceId, 4)).resolves.toBeUndefined();
    expect((await refusalOf(limiter, deviceId)).code).toBe('rate_limited');
  });
});

describeWithRedis('createDeviceRateLimiter on Redis', () => {
  // Two clients stand for two server instances sharing one Redis; connected, as a running server's are.
  const redis = twoInstancesOnRedis();

  test('two servers sharing one Redis with different key prefixes count apart: a device id of one is not limited by the other', async () => {
    const firstServer = createDeviceRateLimiter(10, onRedis(redis.first), undefined, 'fhirgate-east:');
    const secondServer = createDeviceRateLimiter(10, onRedis(redis.second), undefined, 'fhirgate-west:');
    const deviceId = newDeviceId();
    await consumeTimes(firstServer, deviceId, 10);
    expect((await refusalOf(firstServer, deviceId)).code).toBe('rate_limited');
    await expect(consumeTimes(secondServer, deviceId, 10)).resolves.toBeUndefined();
  });

  test('two server instances share the limit of a device: 6 + 5 requests at 10 per second, the 11th is refused', async () => {
    const firstInstance = createDeviceRateLimiter(10, onRedis(redis.first));
    const secondInstance = createDeviceRateLimiter(10, onRedis(redis.second));
    const deviceId = newDeviceId();

    await consumeTimes(firstInstance, deviceId, 6);
    await consumeTimes(secondInstance, deviceId, 4);
    const refusal = await refusalOf(secondInstance, deviceId);
    expect(refusal.code).toBe('rate_limited');
    expect(refusal.status).toBe(429);
    expect(refusal.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect((await refusalOf(firstInstance, deviceId)).code).toBe('rate_limited');
  });

  test('requests arriving at once through both instances: exactly perSecond pass', async () => {
    const instances = [createDeviceRateLimiter(10, onRedis(redis.first)), createDeviceRateLimiter(10, onRedis(redis.second))];
    const deviceId = newDeviceId();

    const outcomes = await Promise.allSettled(Array.from({ length: 16 }, (_, index) => instances[index % 2].consume(deviceId)));
    const refusals = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason] : []));
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(10);
    expect(refusals.every((reason) => AppError.isInstance(reason) && reason.code === 'rate_limited')).toBe(true);
  });

  test('several units at once count on the shared Redis too, across instances', async () => {
    const firstInstance = createDeviceRateLimiter(10, onRedis(redis.first));
    const secondInstance = createDeviceRateLimiter(10, onRedis(redis.second));
    const deviceId = newDeviceId();
    await firstInstance.consume(deviceId, 6);
    await expect(secondInstance.consume(deviceId, 5)).rejects.toMatchObject({ code: 'rate_limited' });
    expect((await refusalOf(firstInstance, deviceId)).code).toBe('rate_limited');
  });

  test('another device keeps its own limit on the shared Redis', async () => {
    const limiter = createDeviceRateLimiter(3, onRedis(redis.first));
    const busyDevice = newDeviceId();
    const quietDevice = newDeviceId();
    await consumeTimes(limiter, busyDevice, 3);
    await refusalOf(limiter, busyDevice);
    await expect(consumeTimes(createDeviceRateLimiter(3, onRedis(redis.second)), quietDevice, 3)).resolves.toBeUndefined();
  });

  test('requests pass again once the one-second window is over', async () => {
    const limiter = createDeviceRateLimiter(3, onRedis(redis.first));
    const deviceId = newDeviceId();
    await consumeTimes(limiter, deviceId, 3);
    await refusalOf(limiter, deviceId);

    await sleep(1100);
    await expect(consumeTimes(limiter, deviceId, 3)).resolves.toBeUndefined();
  });
});
