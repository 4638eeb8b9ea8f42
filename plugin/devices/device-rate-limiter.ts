/**
 * The per-device request limit (default 10 per second) across the token route and `/graphql`, counted in a
 * `LimiterStore`: the host's Redis when there is one (each call with a deadline, the instance's memory while Redis
 * does not answer), memory otherwise.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../errors.ts';
import type { LimiterStore } from './limiter-store.ts';

/** Counts a device's requests. */
export interface DeviceRateLimiter {
  /**
   * Counts one request; throws AppError `rate_limited` (429, with `retryAfterSeconds`) over the limit. The
   * error's `details.firstRefusal` tells the first refusal of the window.
   */
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
            details: { firstRefusal: rejection.consumedPoints === perSecond + 1 },
          });
        }
        throw rejection;
      }
    },
  };
}
