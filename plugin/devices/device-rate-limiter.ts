/**
 * A device's request budget (default 10 per second) across the token route and `/graphql`. Only requests that
 * proved to be the device's spend it: an exchange whose key matched, a `/graphql` request with its valid token.
 * Failed attempts are counted apart (failed-attempt-limiter.ts), so someone sending wrong keys for a device id
 * cannot use up the device's own budget.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../errors.ts';
import type { LimiterStore } from './limiter-store.ts';

/** Counts a device's authenticated requests. */
export interface DeviceRateLimiter {
  /** Counts one request; throws AppError `rate_limited` (429, with `retryAfterSeconds`) over the limit. */
  consume(deviceId: string): Promise<void>;
}

/** A limiter of `perSecond` requests per device and second, in `store`; `onRefused` sees each refusal. */
export function createDeviceRateLimiter(perSecond: number, store: LimiterStore, onRefused: () => void = () => undefined): DeviceRateLimiter {
  const limit = store.limit({ keyPrefix: 'fhirgate:device-rate', points: perSecond, durationSeconds: 1 });
  return {
    consume: async (deviceId) => {
      try {
        await limit.consume(deviceId);
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) {
          onRefused();
          throw new AppError('rate_limited', `Too many requests for this device; at most ${perSecond} per second.`, {
            retryAfterSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)),
            isRetryable: true,
          });
        }
        throw rejection;
      }
    },
  };
}
