/**
 * A device's request budget (default 10 per second) across the token route and `/graphql`. Only requests that
 * proved to be the device's spend it: an exchange whose key matched, a `/graphql` request with its valid token.
 * What a request does counts, not only that it was made: a `/graphql` document with several mutations takes one
 * unit per mutation (`graphql/device-mutation-budget.ts`), all at once before any of them runs, so aliases cannot
 * turn 10 requests a second into 500 writes. Failed attempts are counted apart (failed-attempt-limiter.ts), so
 * someone sending wrong keys for a device id cannot use up the device's own budget.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../errors.ts';
import type { LimiterStore } from './limiter-store.ts';

/** Counts a device's authenticated requests and what they do. */
export interface DeviceRateLimiter {
  /** The device's budget: units per second. */
  readonly perSecond: number;
  /**
   * Takes `units` (one request: 1, the default) from the device's budget, all or none of the work they stand for
   * going ahead; throws AppError `rate_limited` (429, with `retryAfterSeconds`) when they do not fit. Units taken by
   * a refused call stay counted until the second is over.
   */
  consume(deviceId: string, units?: number): Promise<void>;
}

/**
 * A limiter of `perSecond` requests per device and second, in `store`; `onRefused` sees each refusal. Its keys start
 * with `redisKeyPrefix` (the plugin's), so that servers sharing one Redis count apart.
 */
export function createDeviceRateLimiter(perSecond: number, store: LimiterStore, onRefused: () => void = () => undefined, redisKeyPrefix = 'fhirgate:'): DeviceRateLimiter {
  const limit = store.limit({ keyPrefix: `${redisKeyPrefix}device-rate`, points: perSecond, durationSeconds: 1 });
  return {
    perSecond,
    consume: async (deviceId, units = 1) => {
      try {
        await limit.consume(deviceId, units);
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) {
          onRefused();
          throw new AppError('rate_limited', `Too many requests for this device; at most ${perSecond} per second, each mutation of a GraphQL document counting as one.`, {
            retryAfterSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)),
            isRetryable: true,
          });
        }
        throw rejection;
      }
    },
  };
}
