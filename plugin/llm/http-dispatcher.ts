/**
 * The HTTP connection pools fhirgate's provider SDKs send through: undici agents (the HTTP client inside Node's
 * `fetch`) with a bound on connecting, TCP and TLS together, so a provider that accepts connections slowly or
 * never completes a handshake fails fast instead of holding the first-token wait. One pool per limit, shared.
 */
import { Agent } from 'undici';

const pools = new Map<number, Agent>();

/** The shared pool whose connections must be established within `connectTimeoutMs`. */
export function connectionPool(connectTimeoutMs: number): Agent {
  let pool = pools.get(connectTimeoutMs);
  if (!pool) {
    pool = new Agent({ connect: { timeout: connectTimeoutMs } });
    pools.set(connectTimeoutMs, pool);
  }
  return pool;
}

/** SDK client options (openai, Anthropic) sending through the pool of `connectTimeoutMs`; none without a limit. */
export function connectionOptions(connectTimeoutMs: number | undefined): { fetchOptions?: { dispatcher: Agent } } {
  return connectTimeoutMs ? { fetchOptions: { dispatcher: connectionPool(connectTimeoutMs) } } : {};
}

/** A `fetch` that sends through `pool` (for SDKs that take a fetch rather than fetch options). */
export function fetchThrough(pool: Agent, baseFetch: typeof fetch = fetch): typeof fetch {
  return (input, init) => baseFetch(input, { ...init, dispatcher: pool } as RequestInit);
}

/** True when the failure (or one of its causes) is a connection that was not established in time. */
export function isConnectTimeout(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; typeof current === 'object' && current !== null && depth < 5; depth++) {
    const { code, name, message, cause } = current as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown };
    // undici's ConnectTimeoutError; an error from another realm (a VM context) may keep only its name in the message.
    if (code === 'UND_ERR_CONNECT_TIMEOUT' || name === 'ConnectTimeoutError' || (typeof message === 'string' && message.startsWith('ConnectTimeoutError'))) {
      return true;
    }
    current = cause;
  }
  return false;
}
