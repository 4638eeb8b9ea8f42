/**
 * Limits on failed sign-ins (`POST /auth/login`), per source address and per account, counted as the device token
 * route counts its failed exchanges (plugin/devices/failed-attempt-limiter.ts): in the host's Redis when it has one,
 * so they hold across instances, in memory otherwise. A password, unlike a device key of 128 bits, can be guessed,
 * so a lockout here stops the right password too, where it must:
 * - a source past `perSource` failures in `windowSeconds` is locked out of every sign-in (any account, right
 *   password or not) for `lockoutSeconds`;
 * - an account past `perAccount` failures (from every source together) is locked out for `lockoutSeconds` to the
 *   sources that failed on it: a source that has not (its owner, elsewhere) still signs in with the right password,
 *   and is locked out of it by its first failure. Many sources guessing one password get one guess each, not
 *   `perSource`.
 * A locked-out attempt is refused (429 with `Retry-After`) before its password is hashed, so a flood that is locked
 * out costs no hashing. An e-mail nobody has is an account like any other (counted, locked out alike): the answers
 * tell no e-mail from another. Accounts are counted under a hash of the e-mail, never the e-mail itself.
 */
import { createHash } from 'node:crypto';
import type { AppError } from '../../../errors.ts';
import type { HostLogger } from '../../../host.ts';
import { createFailureCounts, lockoutError, type Lockout } from '../../../devices/failed-attempt-limiter.ts';
import type { LimiterStore } from '../../../devices/limiter-store.ts';

/** The limits on failed sign-ins. */
export interface SignInLimits {
  readonly perSource: number;
  readonly perAccount: number;
  readonly windowSeconds: number;
  readonly lockoutSeconds: number;
}

/** 20 failures of a source or 10 on an account in 5 minutes lock them out for 15 minutes. */
export const DEFAULT_SIGN_IN_LIMITS: SignInLimits = { perSource: 20, perAccount: 10, windowSeconds: 300, lockoutSeconds: 900 };

/** One sign-in: where it comes from and the e-mail it names. */
export interface SignInAttempt {
  readonly sourceAddress?: string;
  readonly email: string;
}

/** Decides whether a sign-in may be tried, and counts the ones that fail. */
export interface SignInLimiter {
  /** Before the password is checked: the lockout that refuses this attempt, or undefined. */
  check(attempt: SignInAttempt): Promise<AppError | undefined>;
  /** After a wrong password (or an unknown e-mail): counts it; the lockout to answer it with, or undefined. */
  failed(attempt: SignInAttempt): Promise<AppError | undefined>;
}

/** The limiter, counting in `store` under `<keyPrefix>sign-in-failures:*`. */
export function createSignInLimiter(limits: SignInLimits, store: LimiterStore, options: { readonly keyPrefix?: string; readonly logger?: HostLogger } = {}): SignInLimiter {
  const keyPrefix = `${options.keyPrefix ?? 'fhirgate:'}sign-in-failures`;
  const counts = createFailureCounts(
    { perSource: limits.perSource, perSubject: limits.perAccount, windowSeconds: limits.windowSeconds, lockoutSeconds: limits.lockoutSeconds },
    store,
    { keyPrefix, subjectName: 'account' },
  );
  // Which sources failed on which account, remembered as long as an account's failures can lock it out.
  const failedHere = store.limit({ keyPrefix: `${keyPrefix}:account-source`, points: Number.MAX_SAFE_INTEGER, durationSeconds: limits.windowSeconds + limits.lockoutSeconds });
  const keysOf = (attempt: SignInAttempt): { source: string; account: string } => ({
    source: attempt.sourceAddress ?? 'unknown',
    account: createHash('sha256').update(attempt.email.trim().toLowerCase()).digest('base64url'),
  });
  const refusal = (lockout: Lockout, source: string): AppError => {
    options.logger?.warn('Sign-ins locked out after failed attempts', {
      limits: lockout.limits.map((limit) => (limit === 'subject' ? 'account' : limit)),
      sourceAddress: source,
      retryAfterSeconds: Math.ceil(lockout.retryAfterMs / 1000),
    });
    return lockoutError(lockout.retryAfterMs);
  };
  return {
    check: async (attempt) => {
      const { source, account } = keysOf(attempt);
      const lockout = await counts.lockedOut(source, account);
      if (!lockout) {
        return undefined;
      }
      if (lockout.limits.includes('source') || ((await failedHere.get(`${account}:${source}`))?.consumedPoints ?? 0) > 0) {
        return lockoutError(lockout.retryAfterMs);
      }
      return undefined;
    },
    failed: async (attempt) => {
      const { source, account } = keysOf(attempt);
      const [lockout] = await Promise.all([counts.count(source, account), failedHere.consume(`${account}:${source}`)]);
      return lockout ? refusal(lockout, source) : undefined;
    },
  };
}
