/**
 * Limits on failed device token exchanges (a wrong key, an unknown device id), apart from any device's request
 * budget: per source address (one caller trying many keys or ids) and per device id (many callers trying one
 * device). Past either limit, that source or device id is locked out for `lockoutSeconds`: its failed attempts
 * are answered 429 instead of 403. The lockout is decided after the key check and only for keys that fail, so the
 * holder of the right key is never stopped by it; a stranger's failures cannot lock a device out.
 *
 * Every device id is counted, known or not, so the answers (403, then 429) do not tell which ids exist.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../errors.ts';
import type { LimiterStore } from './limiter-store.ts';

/** The limits on failed attempts. */
export interface FailedAttemptLimits {
  readonly perSource: number;
  readonly perDevice: number;
  readonly windowSeconds: number;
  readonly lockoutSeconds: number;
}

/** Which limit locked an attempt out. */
export type FailedAttemptLimit = 'failed_attempts_source' | 'failed_attempts_device';

/** Counts failed attempts. */
export interface FailedAttemptLimiter {
  /**
   * Counts one failed attempt against its source and its device id. Resolves to the lockout to answer with (an
   * AppError `rate_limited`, 429 with `retryAfterSeconds`) when either is past its limit, undefined otherwise.
   */
  count(attempt: { readonly sourceAddress?: string; readonly deviceId: string }): Promise<AppError | undefined>;
}

/** The limiter, in `store`; `onLockedOut` sees each attempt answered with a lockout, with the limit(s) that decided. */
export function createFailedAttemptLimiter(
  limits: FailedAttemptLimits,
  store: LimiterStore,
  onLockedOut: (limit: FailedAttemptLimit) => void = () => undefined,
): FailedAttemptLimiter {
  const common = { durationSeconds: limits.windowSeconds, blockSeconds: limits.lockoutSeconds };
  const bySource = store.limit({ keyPrefix: 'fhirgate:device-failures:source', points: limits.perSource, ...common });
  const byDevice = store.limit({ keyPrefix: 'fhirgate:device-failures:device', points: limits.perDevice, ...common });
  return {
    count: async ({ sourceAddress, deviceId }) => {
      const [source, device] = await Promise.allSettled([bySource.consume(sourceAddress ?? 'unknown'), byDevice.consume(deviceId)]);
      let lockedOut = false;
      let retryAfterMs = 0;
      for (const [outcome, limit] of [
        [source, 'failed_attempts_source'],
        [device, 'failed_attempts_device'],
      ] as const) {
        if (outcome.status === 'fulfilled') {
          continue;
        }
        if (!(outcome.reason instanceof RateLimiterRes)) {
          throw outcome.reason;
        }
        onLockedOut(limit);
        lockedOut = true;
        retryAfterMs = Math.max(retryAfterMs, outcome.reason.msBeforeNext);
      }
      if (!lockedOut) {
        return undefined;
      }
      return new AppError('rate_limited', 'Too many failed attempts; try again later.', {
        retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
        isRetryable: true,
      });
    },
  };
}
