/**
 * Limits on failed attempts at a credential, apart from any request budget: per source address (one caller trying
 * many credentials) and per subject (many callers trying one device id, or one account). Past either limit, that
 * source or subject is locked out for `lockoutSeconds`.
 *
 * The device token route (`createFailedAttemptLimiter`): a failed exchange (a wrong key, an unknown device id) is
 * answered 429 instead of 403 while its source or device id is locked out. The lockout is decided after the key
 * check and only for keys that fail, so the holder of the right key is never stopped by it; a stranger's failures
 * cannot lock a device out. Every device id is counted, known or not, so the answers (403, then 429) do not tell
 * which ids exist.
 *
 * The standalone host's sign-in counts on the same limits (`createFailureCounts`) and decides more itself
 * (auth/sign-in-limits.ts): a password, unlike a device key, can be guessed.
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

/**
 * The limiter, in `store`; `onLockedOut` sees each attempt answered with a lockout, with the limit(s) that decided.
 * Its keys start with `redisKeyPrefix` (the plugin's), so that servers sharing one Redis count apart.
 */
export function createFailedAttemptLimiter(
  limits: FailedAttemptLimits,
  store: LimiterStore,
  onLockedOut: (limit: FailedAttemptLimit) => void = () => undefined,
  redisKeyPrefix = 'fhirgate:',
): FailedAttemptLimiter {
  const counts = createFailureCounts(
    { perSource: limits.perSource, perSubject: limits.perDevice, windowSeconds: limits.windowSeconds, lockoutSeconds: limits.lockoutSeconds },
    store,
    // Stryker disable next-line all: equivalent, the names only keep these counts apart from each other and from the other limits', which any of these changes still does.
    { keyPrefix: `${redisKeyPrefix}device-failures`, subjectName: 'device' },
  );
  return {
    count: async ({ sourceAddress, deviceId }) => {
      const lockout = await counts.count(sourceAddress ?? 'unknown', deviceId);
      if (!lockout) {
        return undefined;
      }
      for (const limit of lockout.limits) {
        onLockedOut(limit === 'source' ? 'failed_attempts_source' : 'failed_attempts_device');
      }
      return lockoutError(lockout.retryAfterMs);
    },
  };
}

/** Limits on failures per source and per subject (a device id, an account). */
export interface FailureLimits {
  readonly perSource: number;
  readonly perSubject: number;
  readonly windowSeconds: number;
  readonly lockoutSeconds: number;
}

/** A source or subject past its limit: which, and how long until the later lockout ends. */
export interface Lockout {
  readonly limits: readonly ('source' | 'subject')[];
  readonly retryAfterMs: number;
}

/** Failure counts by source and by subject, and their lockouts. */
export interface FailureCounts {
  /** Counts one failure against its source and its subject; the lockout now in force for either, if any. */
  count(source: string, subject: string): Promise<Lockout | undefined>;
  /** The lockout in force now for the source, for the subject, or both, without counting anything. */
  lockedOut(source: string, subject: string): Promise<Lockout | undefined>;
}

/** Failure counts in `store`, under `<keyPrefix>:source` and `<keyPrefix>:<subjectName>`. */
export function createFailureCounts(limits: FailureLimits, store: LimiterStore, keys: { readonly keyPrefix: string; readonly subjectName: string }): FailureCounts {
  const common = { durationSeconds: limits.windowSeconds, blockSeconds: limits.lockoutSeconds };
  const bySource = store.limit({ keyPrefix: `${keys.keyPrefix}:source`, points: limits.perSource, ...common });
  const bySubject = store.limit({ keyPrefix: `${keys.keyPrefix}:${keys.subjectName}`, points: limits.perSubject, ...common });
  return {
    count: async (source, subject) => {
      const outcomes = await Promise.allSettled([bySource.consume(source), bySubject.consume(subject)]);
      const over = outcomes.map((outcome) => {
        if (outcome.status === 'fulfilled') {
          return undefined;
        }
        if (!(outcome.reason instanceof RateLimiterRes)) {
          throw outcome.reason;
        }
        return outcome.reason;
      });
      return lockoutOf(over[0], over[1]);
    },
    lockedOut: async (source, subject) => {
      const [sourceCount, subjectCount] = await Promise.all([bySource.get(source), bySubject.get(subject)]);
      return lockoutOf(pastLimit(sourceCount, limits.perSource), pastLimit(subjectCount, limits.perSubject));
    },
  };
}

/** The refusal of an attempt locked out: 429, retryable after the lockout. */
export function lockoutError(retryAfterMs: number): AppError {
  return new AppError('rate_limited', 'Too many failed attempts; try again later.', {
    retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
    isRetryable: true,
  });
}

function pastLimit(count: RateLimiterRes | null, points: number): RateLimiterRes | undefined {
  return count && count.consumedPoints > points && count.msBeforeNext > 0 ? count : undefined;
}

function lockoutOf(source: RateLimiterRes | undefined, subject: RateLimiterRes | undefined): Lockout | undefined {
  const limits = [...(source ? (['source'] as const) : []), ...(subject ? (['subject'] as const) : [])];
  if (limits.length === 0) {
    return undefined;
  }
  return { limits, retryAfterMs: Math.max(source?.msBeforeNext ?? 0, subject?.msBeforeNext ?? 0) };
}
