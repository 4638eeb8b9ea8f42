/**
 * Where fhirgate's device limits count, through rate-limiter-flexible: in the host's Redis when it has one, so a
 * limit holds across several server instances, in memory otherwise. On Redis every call has a deadline
 * (`RLWrapperTimeouts`) and is refused at once while the client is not connected (`rejectIfRedisNotReady`); a call
 * that misses the deadline or fails is answered from the limiter's in-memory twin, and the shared `RedisGuard`
 * keeps later calls off Redis until it answers again. A Redis that hangs or dies therefore never holds a request
 * longer than the deadline, and the limits keep holding, per instance, meanwhile.
 */
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, RLWrapperTimeouts } from 'rate-limiter-flexible';
import type { HostLogger, HostRedis } from '../host.ts';
import { RedisGuard } from './redis-guard.ts';

/** A limit: `points` per `durationSeconds` and key; over it, the key stays refused for `blockSeconds` (when given). */
export interface LimitOptions {
  readonly keyPrefix: string;
  readonly points: number;
  readonly durationSeconds: number;
  readonly blockSeconds?: number;
}

/** Counts `points` (one by default) per call, all at once; rejects with rate-limiter-flexible's `RateLimiterRes` over the limit. */
export interface Limit {
  consume(key: string, points?: number): Promise<RateLimiterRes>;
  /** The key's count without counting (null when it has none): past `points` while it is refused. */
  get(key: string): Promise<RateLimiterRes | null>;
}

/** Makes limits, all on one Redis (or all in memory). */
export interface LimiterStore {
  limit(options: LimitOptions): Limit;
  /** The guard of the Redis limits; undefined when they count in memory. */
  readonly guard?: RedisGuard;
  /** Stops probing an unavailable Redis. For shutdown. */
  close(): void;
}

/** The default deadline of a Redis call: far above a healthy Redis's answer (well under a millisecond on a LAN). */
export const REDIS_DEADLINE_MS = 250;
/** How often an unavailable Redis is asked again. */
export const REDIS_PROBE_INTERVAL_MS = 1000;

/** Limits on `redis` when given (guarded, with a deadline per call), in memory otherwise. */
export function createLimiterStore(
  redis: HostRedis | undefined,
  options: { readonly logger?: HostLogger; readonly deadlineMs?: number; readonly probeIntervalMs?: number } = {},
): LimiterStore {
  if (!redis) {
    return { limit: (limit) => memoryLimit(limit), close: () => undefined };
  }
  const deadlineMs = options.deadlineMs ?? REDIS_DEADLINE_MS;
  const withDeadline = (limiter: RateLimiterRedis): RLWrapperTimeouts => new RLWrapperTimeouts({ limiter, timeoutMs: deadlineMs });
  const probe = withDeadline(new RateLimiterRedis({ storeClient: redis, keyPrefix: 'fhirgate:redis-probe', points: 1, duration: 1, rejectIfRedisNotReady: true }));
  const guard = new RedisGuard({
    deadlineMs,
    probeIntervalMs: options.probeIntervalMs ?? REDIS_PROBE_INTERVAL_MS,
    probe: () => probe.get('probe'),
    logger: options.logger,
  });
  return {
    guard,
    close: () => guard.close(),
    limit: (limit) => {
      const memory = memoryLimit(limit);
      const shared = withDeadline(
        new RateLimiterRedis({
          storeClient: redis,
          keyPrefix: limit.keyPrefix,
          points: limit.points,
          duration: limit.durationSeconds,
          blockDuration: limit.blockSeconds ?? 0,
          rejectIfRedisNotReady: true,
        }),
      );
      return {
        consume: async (key, points = 1) => {
          const epoch = guard.shouldAsk();
          if (epoch !== undefined) {
            try {
              return await shared.consume(key, points);
            } catch (outcome) {
              // Redis answered: over the limit.
              if (outcome instanceof RateLimiterRes) {
                throw outcome;
              }
              guard.failed(epoch, outcome);
            }
          }
          return memory.consume(key, points);
        },
        get: async (key) => {
          const epoch = guard.shouldAsk();
          if (epoch !== undefined) {
            try {
              return (await shared.get(key)) as RateLimiterRes | null;
            } catch (error) {
              guard.failed(epoch, error);
            }
          }
          return memory.get(key);
        },
      };
    },
  };
}

function memoryLimit(limit: LimitOptions): Limit {
  const memory = new RateLimiterMemory({
    keyPrefix: limit.keyPrefix,
    points: limit.points,
    duration: limit.durationSeconds,
    blockDuration: limit.blockSeconds ?? 0,
  });
  return { consume: (key, points = 1) => memory.consume(key, points), get: (key) => memory.get(key) };
}
