/**
 * A bound on the password checks a host runs at once. Each check is an scrypt (passwords.ts): some 50–200 ms of a
 * CPU core and 16 MB, on libuv's thread pool (4 threads unless `UV_THREADPOOL_SIZE` says otherwise), which the
 * store's commits share: every acknowledged write waits for its `fdatasync` there (store/wal-sync.ts). Sign-ins are
 * unauthenticated, so without a bound of their own a flood of them fills the pool and every chat turn waits behind
 * it (64 looping sign-ins took chat from ~30 ms to ~5 s).
 *
 * So at most `maxConcurrent` checks run (default 1: a core and a thread for hashing, the rest for everything
 * else); up to `maxWaiting` more wait, first come first served, each at most `maxWaitMs`; any other is refused at
 * once, 429 with `Retry-After: 1`, before any work is done for it. A person signing in waits a moment at worst.
 */
import { AppError } from '../../../errors.ts';
import { verifyPassword } from './passwords.ts';

/** How many password checks run and wait at once. */
export interface PasswordCheckLimits {
  /** Checks running at once. */
  readonly maxConcurrent: number;
  /** Checks waiting for a place; beyond them, refused at once. */
  readonly maxWaiting: number;
  /** How long a check may wait for its place before it is refused. */
  readonly maxWaitMs: number;
}

/** One check at a time; a few wait, none longer than a second. */
export const DEFAULT_PASSWORD_CHECK_LIMITS: PasswordCheckLimits = { maxConcurrent: 1, maxWaiting: 8, maxWaitMs: 1000 };

interface Waiter {
  readonly start: () => void;
  readonly timer: NodeJS.Timeout;
}

/** The password checks of one host. */
export class PasswordChecks {
  readonly limits: PasswordCheckLimits;
  #running = 0;
  readonly #waiting: Waiter[] = [];

  constructor(limits: PasswordCheckLimits = DEFAULT_PASSWORD_CHECK_LIMITS) {
    this.limits = limits;
  }

  /** Checks running now. */
  get running(): number {
    return this.#running;
  }

  /**
   * Whether `password` matches `hash` (a missing hash never matches, after the same work), once a place is free;
   * rejects with `rate_limited` (429, `Retry-After: 1`) when none is free soon enough.
   */
  async verify(password: string, hash: string | undefined): Promise<boolean> {
    await this.#enter();
    try {
      return await verifyPassword(password, hash);
    } finally {
      this.#leave();
    }
  }

  #enter(): Promise<void> {
    if (this.#running < this.limits.maxConcurrent) {
      this.#running++;
      return Promise.resolve();
    }
    if (this.#waiting.length >= this.limits.maxWaiting) {
      return Promise.reject(busy());
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        // The place is handed over by the check that leaves: `#running` stays as it is.
        start: () => {
          clearTimeout(waiter.timer);
          resolve();
        },
        timer: setTimeout(() => {
          this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
          reject(busy());
        }, this.limits.maxWaitMs),
      };
      this.#waiting.push(waiter);
    });
  }

  #leave(): void {
    const next = this.#waiting.shift();
    if (next) {
      next.start();
    } else {
      this.#running--;
    }
  }
}

function busy(): AppError {
  return new AppError('rate_limited', 'Too many sign-ins are being checked on this server right now; retry shortly.', {
    isRetryable: true,
    retryAfterSeconds: 1,
    details: { limit: 'password_checks' },
  });
}
