/**
 * The standalone host's Redis client (`REDIS_URL`), set up as Medplum sets up its own: ioredis reconnecting on its
 * own. Its connection errors are logged as one warning when the connection is lost and one line when it is back,
 * not one stack trace per reconnect attempt (an ioredis client without an `error` listener prints each one).
 * fhirgate's limits do not wait on this client: each of their calls has its own deadline (devices/limiter-store.ts).
 */
import { Redis } from 'ioredis';
import type { HostLogger } from '../../host.ts';

/** A client on `url` whose connection state changes are logged once each. */
export function connectStandaloneRedis(url: string, logger: HostLogger): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  let lost = false;
  let lostAt = 0;
  const markLost = (message: string, data: Record<string, unknown>): void => {
    if (!lost) {
      lost = true;
      lostAt = Date.now();
      logger.warn(message, data);
    }
  };
  redis.on('error', (error: Error) => markLost('Redis connection failed; reconnecting in the background', { error: `${error.name}: ${error.message}` }));
  // A connection that closes without an error (a Redis stopped cleanly) is lost too; a deliberate quit never reconnects.
  redis.on('reconnecting', () => markLost('Redis connection lost; reconnecting in the background', {}));
  redis.on('ready', () => {
    if (lost) {
      lost = false;
      logger.info('Redis connection restored', { lostMs: Date.now() - lostAt });
    }
  });
  return redis;
}
