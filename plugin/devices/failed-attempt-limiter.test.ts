import { describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { describeWithRedis, twoInstancesOnRedis } from '../../test/support/redis.ts';
import { createFailedAttemptLimiter, type FailedAttemptLimit, type FailedAttemptLimiter } from './failed-attempt-limiter.ts';
import { createLimiterStore } from './limiter-store.ts';

const LIMITS = { perSource: 3, perDevice: 5, windowSeconds: 60, lockoutSeconds: 120 };

/** The status each failed attempt is answered with: 403 (counted) or 429 (locked out). */
async function statusesOf(limiter: FailedAttemptLimiter, attempts: { sourceAddress: string; deviceId: string }[]): Promise<number[]> {
  const statuses: number[] = [];
  for (const attempt of attempts) {
    const lockout = await limiter.count(attempt);
    statuses.push(lockout ? lockout.status : 403);
  }
  return statuses;
}

const repeat = <T>(value: T, times: number): T[] => Array.from({ length: times }, () => value);

describe('createFailedAttemptLimiter', () => {
  test('past the per-source limit, that source is locked out (429 for the lockout, not the window) across device ids', async () => {
    const lockedBy: FailedAttemptLimit[] = [];
    const limiter = createFailedAttemptLimiter(LIMITS, createLimiterStore(undefined), (limit) => lockedBy.push(limit));
    const attempts = ['a', 'b', 'c', 'd', 'e'].map((deviceId) => ({ sourceAddress: '10.0.0.1', deviceId: `${deviceId}-${randomUUID()}` }));

    expect(await statusesOf(limiter, attempts)).toEqual([403, 403, 403, 429, 429]);
    expect(lockedBy).toEqual(['failed_attempts_source', 'failed_attempts_source']);
    const lockout = await limiter.count({ sourceAddress: '10.0.0.1', deviceId: 'f' });
    expect(lockout).toMatchObject({ code: 'rate_limited', status: 429, message: 'Too many failed attempts; try again later.' });
    // Locked out for lockoutSeconds, longer than what is left of the window.
    expect(lockout?.retryAfterSeconds).toBeGreaterThan(LIMITS.windowSeconds);
    expect(lockout?.retryAfterSeconds).toBeLessThanOrEqual(LIMITS.lockoutSeconds);
    // Another source is not affected.
    expect(await limiter.count({ sourceAddress: '10.0.0.2', deviceId: 'g' })).toBeUndefined();
  });

  test('past the per-device limit, failures naming that id are locked out whatever their source; other ids are not', async () => {
    const lockedBy: FailedAttemptLimit[] = [];
    const limiter = createFailedAttemptLimiter(LIMITS, createLimiterStore(undefined), (limit) => lockedBy.push(limit));
    const deviceId = `monitor-${randomUUID()}`;
    const spread = Array.from({ length: 7 }, (_, index) => ({ sourceAddress: `10.1.0.${index}`, deviceId }));

    expect(await statusesOf(limiter, spread)).toEqual([403, 403, 403, 403, 403, 429, 429]);
    expect(lockedBy).toEqual(['failed_attempts_device', 'failed_attempts_device']);
    expect(await limiter.count({ sourceAddress: '10.1.0.99', deviceId: `other-${randomUUID()}` })).toBeUndefined();
  });
});

describeWithRedis('createFailedAttemptLimiter on Redis', () => {
  // Two clients stand for two server instances sharing one Redis; connected, as a running server's are.
  const redis = twoInstancesOnRedis();

  test('two server instances share the failure counts of a source', async () => {
    const first = createFailedAttemptLimiter(LIMITS, createLimiterStore(redis.first));
    const second = createFailedAttemptLimiter(LIMITS, createLimiterStore(redis.second));
    const sourceAddress = `203.0.113.${randomUUID()}`;
    const attempt = (deviceId: string) => ({ sourceAddress, deviceId: `${deviceId}-${randomUUID()}` });

    expect(await statusesOf(first, [attempt('a'), attempt('b')])).toEqual([403, 403]);
    expect(await statusesOf(second, [attempt('c'), attempt('d')])).toEqual([403, 429]);
    expect(await statusesOf(first, [attempt('e')])).toEqual([429]);
  });
});
