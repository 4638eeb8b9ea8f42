/**
 * Sessions of 2025-11-25 MCP clients: such a client declares its name and version (clientInfo) only at `initialize`,
 * so the server answers it with an `Mcp-Session-Id` under which it keeps them, and later requests carrying the id
 * recover them for the disclosure record. A session is the caller's (project and profile): an id presented by
 * another caller, or one never issued, is unknown (404, as MCP's Streamable HTTP transport says). It grants nothing:
 * every request is still authenticated and served by a fresh server bound to its own caller; the session only names
 * the client.
 *
 * Kept in the host's Redis when it has one (so any instance recovers it), each key expiring after `idleSeconds`
 * without use; in memory otherwise (a single-process host). The ids are random; Redis holds only their hashes. A
 * Redis that does not answer within the deadline never holds a request: no session is opened (the client is served
 * unnamed, as before sessions), and a request presenting an id is served without the name.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { HostLogger, HostRedis } from '../host.ts';
import { REDIS_DEADLINE_MS } from '../devices/limiter-store.ts';

/** The client a session names, and whose it is. */
export interface McpSession {
  readonly projectId: string;
  readonly profile: string;
  readonly client: { readonly name: string; readonly version: string };
}

/** A session looked up: found, unknown (never issued, ended, expired or another caller's), or not knowable now. */
export type McpSessionLookup = { readonly found: McpSession } | 'unknown' | 'unavailable';

/** How long a session lives without use, by default: a working day's pause and more. */
export const MCP_SESSION_IDLE_SECONDS = 24 * 60 * 60;
// Sessions an instance without Redis keeps; beyond it the oldest go (their clients are then asked to initialize again).
const MAX_MEMORY_SESSIONS = 10_000;

/** Opens, finds and ends sessions. */
export class McpSessions {
  readonly #redis: HostRedis | undefined;
  readonly #keyPrefix: string;
  readonly #idleSeconds: number;
  readonly #deadlineMs: number;
  readonly #logger: HostLogger | undefined;
  readonly #memory = new Map<string, { readonly session: McpSession; expires: number }>();

  constructor(options: { readonly redis?: HostRedis; readonly keyPrefix: string; readonly idleSeconds?: number; readonly deadlineMs?: number; readonly logger?: HostLogger }) {
    this.#redis = options.redis;
    this.#keyPrefix = `${options.keyPrefix}mcp-session:`;
    this.#idleSeconds = options.idleSeconds ?? MCP_SESSION_IDLE_SECONDS;
    this.#deadlineMs = options.deadlineMs ?? REDIS_DEADLINE_MS;
    this.#logger = options.logger;
  }

  /** Opens a session and returns its id; undefined when it could not be kept (the client is then served unnamed). */
  async open(session: McpSession): Promise<string | undefined> {
    const id = randomBytes(32).toString('base64url');
    const key = this.#keyOf(id);
    if (!this.#redis) {
      this.#memory.set(key, { session, expires: Date.now() + this.#idleSeconds * 1000 });
      if (this.#memory.size > MAX_MEMORY_SESSIONS) {
        this.#memory.delete(this.#memory.keys().next().value ?? '');
      }
      return id;
    }
    try {
      await this.#ask('SET', key, JSON.stringify(session), 'EX', this.#idleSeconds);
      return id;
    } catch (error) {
      this.#logger?.warn('fhirgate could not keep an MCP session in Redis; the client is served without one', { error: String(error) });
      return undefined;
    }
  }

  /** The session of `id` if it is the caller's; its idle time starts again. */
  async find(id: string, caller: { readonly projectId: string; readonly profile: string }): Promise<McpSessionLookup> {
    const key = this.#keyOf(id);
    let session: McpSession | undefined;
    if (!this.#redis) {
      const kept = this.#memory.get(key);
      if (kept && kept.expires > Date.now()) {
        kept.expires = Date.now() + this.#idleSeconds * 1000;
        session = kept.session;
      } else {
        this.#memory.delete(key);
      }
    } else {
      try {
        session = parseSession(await this.#ask('GETEX', key, 'EX', this.#idleSeconds));
      } catch (error) {
        this.#logger?.warn('fhirgate could not read an MCP session from Redis; the request is served without the client’s name', { error: String(error) });
        return 'unavailable';
      }
    }
    return session && session.projectId === caller.projectId && session.profile === caller.profile ? { found: session } : 'unknown';
  }

  /** Ends the session of `id` (already found to be the caller's). */
  async end(id: string): Promise<void> {
    const key = this.#keyOf(id);
    if (!this.#redis) {
      this.#memory.delete(key);
      return;
    }
    await this.#ask('DEL', key);
  }

  #keyOf(id: string): string {
    return `${this.#keyPrefix}${createHash('sha256').update(id).digest('base64url')}`;
  }

  /** One Redis command within the deadline; refused at once while the client is not connected. */
  async #ask(command: string, ...args: (string | number)[]): Promise<unknown> {
    const redis = this.#redis;
    if (!redis || redis.status !== 'ready') {
      throw new Error(`Redis is not ready (${redis?.status ?? 'none'})`);
    }
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not answer within ${this.#deadlineMs} ms`)), this.#deadlineMs);
    });
    try {
      return await Promise.race([redis.call(command, ...args), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The clientInfo of an `initialize` request's params, when it names the client; trimmed to what a record holds. */
export function clientInfoOf(params: unknown): McpSession['client'] | undefined {
  const info = typeof params === 'object' && params !== null ? (params as { clientInfo?: unknown }).clientInfo : undefined;
  if (typeof info !== 'object' || info === null) {
    return undefined;
  }
  const { name, version } = info as { name?: unknown; version?: unknown };
  if (typeof name !== 'string' || typeof version !== 'string' || name.trim() === '') {
    return undefined;
  }
  return { name: printable(name, 100), version: printable(version, 50) };
}

function printable(text: string, maxLength: number): string {
  return text.replace(/[\u0000-\u001f\u007f]/g, ' ').trim().slice(0, maxLength);
}

function parseSession(stored: unknown): McpSession | undefined {
  if (typeof stored !== 'string') {
    return undefined;
  }
  try {
    const value = JSON.parse(stored) as Partial<McpSession>;
    const client = clientInfoOf({ clientInfo: value.client });
    return typeof value.projectId === 'string' && typeof value.profile === 'string' && client ? { projectId: value.projectId, profile: value.profile, client } : undefined;
  } catch {
    return undefined;
  }
}
