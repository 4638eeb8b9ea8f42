import { afterEach, beforeEach, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { describeWithRedisServer } from '../../test/support/redis.ts';
import { startOwnRedis, type OwnRedis } from '../../test/support/own-redis.ts';
import { createTestTelemetry } from '../../test/support/telemetry.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import type { FhirgateHost } from '../host.ts';
import { deviceAuthSchema } from './device-auth-config.ts';
import { createDeviceServices, type DeviceServices } from './device-services.ts';

describeWithRedisServer('device services on a Redis that hangs', () => {
  let redis: OwnRedis;
  let client: Redis;
  let services: DeviceServices;
  const telemetry = createTestTelemetry();

  beforeEach(async () => {
    redis = await startOwnRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    await client.ping();
    // Only the parts the limits use: the Redis client. Nothing here reads or writes FHIR.
    const host = { redis: client } as unknown as FhirgateHost;
    const options = deviceAuthSchema.parse({
      valid_keys: { 'monitor-1': 'env:FHIRGATE_UNUSED_KEY' },
      jwt_secret: 'env:FHIRGATE_UNUSED_SECRET',
      identifier_system: 'urn:example:devices',
      project_id: 'project-1',
      rate_limit_per_second: 2,
    });
    process.env.FHIRGATE_UNUSED_KEY = randomUUID();
    process.env.FHIRGATE_UNUSED_SECRET = randomUUID();
    services = createDeviceServices(host, options, telemetry.telemetry);
  });

  afterEach(async () => {
    await services.close();
    client.disconnect();
    await redis.stop();
    delete process.env.FHIRGATE_UNUSED_KEY;
    delete process.env.FHIRGATE_UNUSED_SECRET;
  });

  const gauge = async (): Promise<number | undefined> => {
    const [point] = await telemetry.points('fhirgate.redis.available');
    return typeof point?.value === 'number' ? point.value : undefined;
  };

  test('fhirgate.redis.available goes to 0 while Redis is paused, the budget still holds, and back to 1 once it answers', async () => {
    expect(await gauge()).toBe(1);
    const deviceId = `monitor-${randomUUID()}`;
    redis.pause();
    const started = performance.now();
    await services.rateLimiter.consume(deviceId);
    await services.rateLimiter.consume(deviceId);
    await expect(services.rateLimiter.consume(deviceId)).rejects.toMatchObject({ code: 'rate_limited', status: 429 });
    // Generous: the deadline is 250 ms, and the pause lasts until the test ends it.
    expect(performance.now() - started).toBeLessThan(2000);
    expect(await gauge()).toBe(0);

    redis.resume();
    await waitFor(async () => ((await gauge()) === 1 ? true : undefined), 5000);
  });
});
