/**
 * MCP requests per caller (project and profile) and minute, counted in the host's Redis when it has one, so the
 * limit holds across instances, and in memory otherwise or while Redis does not answer (devices/limiter-store.ts).
 * Beside it, the per-instance bound on requests running at once (chat/caller-slots.ts): this one stops an agent
 * that loops, that one a burst of slow calls.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../errors.ts';
import type { LimiterStore } from '../devices/limiter-store.ts';

/** Counts one caller's MCP requests. */
export interface McpRateLimit {
  /** Counts a request of `caller`; throws AppError `rate_limited` (429, with `retryAfterSeconds`) beyond the limit. */
  consume(caller: string): Promise<void>;
}

/** A limit of `perMinute` requests per caller and minute, in `store`, under the plugin's Redis key prefix. */
export function createMcpRateLimit(perMinute: number, store: LimiterStore, keyPrefix: string): McpRateLimit {
  const limit = store.limit({ keyPrefix: `${keyPrefix}mcp-rate`, points: perMinute, durationSeconds: 60 });
  return {
    consume: async (caller) => {
      try {
        await limit.consume(caller);
      } catch (rejection) {
        if (rejection instanceof RateLimiterRes) {
          throw new AppError('rate_limited', `Too many MCP requests: at most ${perMinute} per minute per caller. Retry after the time given.`, {
            retryAfterSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)),
            isRetryable: true,
          });
        }
        throw rejection;
      }
    },
  };
}
