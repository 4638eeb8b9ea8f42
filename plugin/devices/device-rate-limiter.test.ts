import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { connectTestRedis, describeWithRedis } from '../../test/support/redis.ts';
import { AppError } from '../errors.ts';
import { createDeviceRateLimiter } from './device-rate-limiter.ts';
import type { DeviceRateLimiter } from './device-rate-limiter.ts';

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

/** A localhost port nothing listens on: bound once by the OS, then released. */
async function findClosedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  if (address === null || typeof address === 'string') {
    throw new Error('expected a TCP address');
  }
  return address.port;
}

describe('createDeviceRateLimiter in memory', () => {
  test('lets perSecond requests through, then refuses with rate_limited (429) and a retry delay', async () => {
    const limiter = createDeviceRateLimiter(10, undefined);
    const deviceId = newDeviceId();
    await consumeTimes(limiter, deviceId, 10);

    const refusal = await refusalOf(limiter, deviceId);
    expect(refusal.code).toBe('rate_limited');
    expect(refusal.status).toBe(429);
    expect(refusal.isRetryable).toBe(true);
    expect(refusal.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refusal.message).toContain('10 per second');
  });

  test('marks only the first refusal of the window as firstRefusal', async () => {
    const limiter = createDeviceRateLimiter(3, undefined);
    const deviceId = newDeviceId();
    await consumeTimes(limiter, deviceId, 3);
    expect((await refusalOf(limiter, deviceId)).details).toEqual({ firstRefusal: true });
    expect((await refusalOf(limiter, deviceId)).details).toEqual({ firstRefusal: false });
    expect((await refusalOf(limiter, deviceId)).details).toEqual({ firstRefusal: false });
  });

  test('one device using up its limit does not limit another device', async () => {
    const limiter = createDeviceRateLimiter(5, undefined);
    const busyDevice = newDeviceId();
    const quietDevice = newDeviceId();
    await consumeTimes(limiter, busyDevice, 5);
    await refusalOf(limiter, busyDevice);

    await expect(consumeTimes(limiter, quietDevice, 5)).resolves.toBeUndefined();
    expect((await refusalOf(limiter, quietDevice)).details).toEqual({ firstRefusal: true });
  });

  test('two limiters in one process do not share counters without Redis', async () => {
    const deviceId = newDeviceId();
    const first = createDeviceRateLimiter(2, undefined);
    const second = createDeviceRateLimiter(2, undefined);
    await consumeTimes(first, deviceId, 2);
    await expect(consumeTimes(second, deviceId, 2)).resolves.toBeUndefined();
  });

  test('requests pass again once the one-second window is over', async () => {
    const limiter = createDeviceRateLimiter(4, undefined);
    const deviceId = newDeviceId();
    await consumeTimes(limiter, deviceId, 4);
    await refusalOf(limiter, deviceId);

    await sleep(1100);
    await expect(consumeTimes(limiter, deviceId, 4)).resolves.toBeUndefined();
    expect((await refusalOf(limiter, deviceId)).details).toEqual({ firstRefusal: true });
  });
});

describeWithRedis('createDeviceRateLimiter on Redis', () => {
  let firstClient: Redis;
  let secondClient: Redis;

  beforeAll(() => {
    // Two clients stand for two server instances sharing one Redis.
    firstClient = connectTestRedis();
    secondClient = connectTestRedis();
  });

  afterAll(async () => {
    await Promise.all([firstClient.quit(), secondClient.quit()]);
  });

  test('two server instances share the limit of a device: 6 + 5 requests at 10 per second, the 11th is refused', async () => {
    const firstInstance = createDeviceRateLimiter(10, firstClient);
    const secondInstance = createDeviceRateLimiter(10, secondClient);
    const deviceId = newDeviceId();

    await consumeTimes(firstInstance, deviceId, 6);
    await consumeTimes(secondInstance, deviceId, 4);
    const refusal = await refusalOf(secondInstance, deviceId);
    expect(refusal.code).toBe('rate_limited');
    expect(refusal.status).toBe(429);
    expect(refusal.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refusal.details).toEqual({ firstRefusal: true });
    expect((await refusalOf(firstInstance, deviceId)).details).toEqual({ firstRefusal: false });
  });

  test('requests arriving at once through both instances: exactly perSecond pass, one is the first refusal', async () => {
    const instances = [createDeviceRateLimiter(10, firstClient), createDeviceRateLimiter(10, secondClient)];
    const deviceId = newDeviceId();

    const outcomes = await Promise.allSettled(Array.from({ length: 16 }, (_, index) => instances[index % 2].consume(deviceId)));
    const refusals = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason] : []));
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(10);
    expect(refusals.every((reason) => AppError.isInstance(reason) && reason.code === 'rate_limited')).toBe(true);
    expect(refusals.filter((reason) => AppError.isInstance(reason) && reason.details?.firstRefusal === true)).toHaveLength(1);
  });

  test('another device keeps its own limit on the shared Redis', async () => {
    const limiter = createDeviceRateLimiter(3, firstClient);
    const busyDevice = newDeviceId();
    const quietDevice = newDeviceId();
    await consumeTimes(limiter, busyDevice, 3);
    await refusalOf(limiter, busyDevice);
    await expect(consumeTimes(createDeviceRateLimiter(3, secondClient), quietDevice, 3)).resolves.toBeUndefined();
  });

  test('requests pass again once the one-second window is over', async () => {
    const limiter = createDeviceRateLimiter(3, firstClient);
    const deviceId = newDeviceId();
    await consumeTimes(limiter, deviceId, 3);
    await refusalOf(limiter, deviceId);

    await sleep(1100);
    await expect(consumeTimes(limiter, deviceId, 3)).resolves.toBeUndefined();
  });
});

describe('createDeviceRateLimiter when Redis is unreachable', () => {
  let unreachableClient: Redis;

  beforeAll(async () => {
    unreachableClient = new Redis({
      host: '127.0.0.1',
      port: await findClosedPort(),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // One failed connection attempt is enough; no reconnect timers stay behind.
      retryStrategy: () => null,
    });
    // The connection errors are expected; without a listener ioredis reports them as unhandled.
    unreachableClient.on('error', () => undefined);
  });

  afterAll(() => {
    unreachableClient.disconnect();
  });

  test('keeps limiting in memory instead of throwing or letting every request through', async () => {
    const limiter = createDeviceRateLimiter(5, unreachableClient);
    const deviceId = newDeviceId();

    const started = performance.now();
    await expect(consumeTimes(limiter, deviceId, 5)).resolves.toBeUndefined();
    const refusal = await refusalOf(limiter, deviceId);
    expect(refusal.code).toBe('rate_limited');
    expect(refusal.status).toBe(429);
    expect(refusal.details).toEqual({ firstRefusal: true });
    expect(await refusalOf(limiter, deviceId)).toMatchObject({ code: 'rate_limited', details: { firstRefusal: false } });
    // The fallback must not wait on Redis timeouts (ioredis waits 10 s for a connection): a device would see every
    // request hang. Half that wait leaves room for a busy machine.
    expect(performance.now() - started).toBeLessThan(5000);
  });

  test('a second device is still counted on its own during the outage', async () => {
    const limiter = createDeviceRateLimiter(2, unreachableClient);
    const busyDevice = newDeviceId();
    await consumeTimes(limiter, busyDevice, 2);
    await refusalOf(limiter, busyDevice);
    await expect(consumeTimes(limiter, newDeviceId(), 2)).resolves.toBeUndefined();
  });
});
