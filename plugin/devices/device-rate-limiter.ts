/**
 * The per-device request limit (default 10 per second) across the token route and `/graphql`, through
 * rate-limiter-flexible: counters in the host's Redis when there is one, so the limit holds across several
 * server instances, in memory otherwise. If Redis fails, an in-memory limiter takes over for that instance
 * rather than letting every request through or refusing them all.
 */
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { AppError } from '../errors.ts';
import type { HostRedis } from '../host.ts';

/** Counts a device's requests. */
export interface DeviceRateLimiter {
  /**
   * Counts one request; throws AppError `rate_limited` (429, with `retryAfterSeconds`) over the limit. The
   * error's `details.firstRefusal` tells the first refusal of the window.
   */
  consume(deviceId: string): Promise<void>;
}

/** A limiter of `perSecond` requests per device and second, on `redis` when given; `onRefused` sees each refusal. */
export function createDeviceRateLimiter(perSecond: number, redis: HostRedis | undefined, onRefused: () => void = () => undefined): DeviceRateLimiter {
  const keyPrefix = 'fhirgate:device-rate';
  const memory = new RateLimiterMemory({ keyPrefix, points: perSecond, duration: 1 });
  const limiter: RateLimiterAbstract = redis
    ? new RateLimiterRedis({ storeClient: redis, keyPrefix, points: perSecond, duration: 1, insuranceLimiter: memory })
    : memory;
  return {
    consume: async (deviceId) => {
      try {
        await limiter.consume(deviceId);
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
