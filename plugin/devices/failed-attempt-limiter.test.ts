import { describe, expect, jest, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { describeWithRedis, twoInstancesOnRedis } from '../../test/support/redis.ts';
import { createFailedAttemptLimiter, createFailureCounts, type FailedAttemptLimit, type FailedAttemptLimiter, type FailureCounts } from './failed-attempt-limiter.ts';
import { createLimiterStore, type LimiterStore } from './limiter-store.ts';

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
    expect(lockout).toMatchObject({ code: 'rate_limited', status: 429, message: 'Too many failed attempts; try again later.', isRetryable: true });
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

  test('failures without a source address are counted together, as one source', async () => {
    const limiter = createFailedAttemptLimiter(LIMITS, createLimiterStore(undefined));
    const outcomes: (number | undefined)[] = [];
    for (const deviceId of ['a', 'b', 'c', 'd']) {
      outcomes.push((await limiter.count({ deviceId: `${deviceId}-${randomUUID()}` }))?.status);
    }
    expect(outcomes).toEqual([undefined, undefined, undefined, 429]);
  });

  test('a store that fails is an error, not a lockout: the attempt is not answered "try again later"', async () => {
    const failure = new Error('the store does not answer');
    const failing: LimiterStore = { limit: () => ({ consume: () => Promise.reject(failure), get: () => Promise.reject(failure) }), close: () => undefined };
    await expect(createFailedAttemptLimiter(LIMITS, failing).count({ sourceAddress: '10.0.0.1', deviceId: 'monitor-1' })).rejects.toBe(failure);
  });
});

const SIGN_IN_LIMITS = { perSource: 3, perSubject: 5, windowSeconds: 60, lockoutSeconds: 120 };
const keysOf = (subjectName: string) => ({ keyPrefix: `test:${randomUUID()}`, subjectName });

/** Counts `times` failures of `source` on `subject`; the lockout the last one was answered with. */
async function failTimes(counts: FailureCounts, source: string, subject: string, times: number) {
  let lockout;
  for (let index = 0; index < times; index++) {
    lockout = await counts.count(source, subject);
  }
  return lockout;
}

describe('createFailureCounts: the lockout in force, asked before an attempt (a sign-in, before its password is checked)', () => {
  test('none for a source and subject that never failed, nor after failures up to the limit: the next attempt is tried', async () => {
    const counts = createFailureCounts(SIGN_IN_LIMITS, createLimiterStore(undefined), keysOf('account'));
    expect(await counts.lockedOut('10.0.0.1', 'ward-nurse')).toBeUndefined();
    expect(await failTimes(counts, '10.0.0.1', 'ward-nurse', 3)).toBeUndefined();
    expect(await counts.lockedOut('10.0.0.1', 'ward-nurse')).toBeUndefined();
  });

  test('asking counts nothing: however often it is asked, no lockout follows', async () => {
    const counts = createFailureCounts(SIGN_IN_LIMITS, createLimiterStore(undefined), keysOf('account'));
    await failTimes(counts, '10.0.0.1', 'ward-nurse', 1);
    for (let index = 0; index < 10; index++) {
      expect(await counts.lockedOut('10.0.0.1', 'ward-nurse')).toBeUndefined();
    }
    expect(await failTimes(counts, '10.0.0.1', 'ward-nurse', 2)).toBeUndefined();
  });

  test('once a failure goes past the source limit, that source is locked out for the lockout, on any subject', async () => {
    const counts = createFailureCounts(SIGN_IN_LIMITS, createLimiterStore(undefined), keysOf('account'));
    expect(await failTimes(counts, '10.0.0.1', 'ward-nurse', 4)).toMatchObject({ limits: ['source'] });
    const lockout = await counts.lockedOut('10.0.0.1', 'someone-else');
    expect(lockout?.limits).toEqual(['source']);
    expect(lockout?.retryAfterMs).toBeGreaterThan(SIGN_IN_LIMITS.windowSeconds * 1000);
    expect(lockout?.retryAfterMs).toBeLessThanOrEqual(SIGN_IN_LIMITS.lockoutSeconds * 1000);
    expect(await counts.lockedOut('10.0.0.2', 'someone-else')).toBeUndefined();
  });

  test('once a failure goes past the subject limit, that subject is locked out from any source; both limits are named when both are past', async () => {
    const counts = createFailureCounts(SIGN_IN_LIMITS, createLimiterStore(undefined), keysOf('account'));
    for (let index = 0; index < 6; index++) {
      await counts.count(`10.1.0.${index}`, 'ward-nurse');
    }
    expect((await counts.lockedOut('10.1.0.99', 'ward-nurse'))?.limits).toEqual(['subject']);
    await failTimes(counts, '10.1.0.99', 'someone-else', 4);
    expect((await counts.lockedOut('10.1.0.99', 'ward-nurse'))?.limits).toEqual(['source', 'subject']);
  });

  test('the lockout ends when the time it gave is up, to the millisecond', async () => {
    jest.useFakeTimers({ now: Date.now(), doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const counts = createFailureCounts(SIGN_IN_LIMITS, createLimiterStore(undefined), keysOf('account'));
      const lockout = await failTimes(counts, '10.0.0.1', 'ward-nurse', 4);
      expect(lockout?.retryAfterMs).toBe(SIGN_IN_LIMITS.lockoutSeconds * 1000);
      jest.setSystemTime(Date.now() + SIGN_IN_LIMITS.lockoutSeconds * 1000 - 1);
      expect((await counts.lockedOut('10.0.0.1', 'ward-nurse'))?.retryAfterMs).toBe(1);
      jest.setSystemTime(Date.now() + 1);
      expect(await counts.lockedOut('10.0.0.1', 'ward-nurse')).toBeUndefined();
    } finally {
      jest.useRealTimers();
    }
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

  test('two servers sharing one Redis with different key prefixes count a source apart', async () => {
    const east = createFailedAttemptLimiter(LIMITS, createLimiterStore(redis.first), undefined, 'fhirgate-east:');
    const west = createFailedAttemptLimiter(LIMITS, createLimiterStore(redis.second), undefined, 'fhirgate-west:');
    const sourceAddress = `203.0.113.${randomUUID()}`;
    const attempt = (deviceId: string) => ({ sourceAddress, deviceId: `${deviceId}-${randomUUID()}` });

    expect(await statusesOf(east, [attempt('a'), attempt('b'), attempt('c'), attempt('d')])).toEqual([403, 403, 403, 429]);
    // The same source's failures on the other server are its own: not locked out by the first server's.
    expect(await statusesOf(west, [attempt('e')])).toEqual([403]);
  });

  test('limits of different names share one Redis without mixing their counts, by source or by subject', async () => {
    // The device exchange and the standalone host's sign-in both count failures this way, in the same Redis.
    const devices = createFailureCounts(SIGN_IN_LIMITS, createLimiterStore(redis.first), keysOf('device'));
    const signIns = createFailureCounts(SIGN_IN_LIMITS, createLimiterStore(redis.first), keysOf('account'));
    const source = `203.0.113.${randomUUID()}`;
    const subject = `monitor-${randomUUID()}`;

    expect(await failTimes(devices, source, subject, 4)).toMatchObject({ limits: ['source'] });
    expect(await signIns.lockedOut(source, subject)).toBeUndefined();
    expect(await failTimes(devices, `${source}-b`, subject, 2)).toMatchObject({ limits: ['subject'] });
    expect(await signIns.lockedOut(`${source}-c`, subject)).toBeUndefined();
  });
});
