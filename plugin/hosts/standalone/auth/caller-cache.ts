/**
 * What an access token resolved to, kept for a few seconds so that a client's next requests skip the RS256
 * verification and the reads of the project and AccessPolicies. Keyed by a SHA-256 of the token, never the token
 * text. An entry ends at the token's own expiry or after the TTL, whichever comes first; the least recently used
 * goes when the cache is full. What revokes a caller (its Login, its membership) is re-read on every hit by the
 * caller of this cache; the rest (project, policy contents) is as old as the TTL at most.
 */
import { createHash } from 'node:crypto';
import type { CallerContext } from '../../../host.ts';
import type { AccessTokenClaims } from './access-tokens.ts';

/** A resolved caller and what it was resolved from. */
export interface CachedCaller {
  readonly claims: AccessTokenClaims;
  /** Its membership's `meta.versionId` is the version the policy was built from. */
  readonly context: CallerContext;
}

/** How long and how many callers are kept. */
export interface CallerCacheOptions {
  /** Milliseconds an entry lives at most (default 5,000); 0 turns the cache off. */
  readonly ttlMs?: number;
  /** Entries kept at most (default 1,000). */
  readonly maxEntries?: number;
  /** The clock, in epoch milliseconds (tests). */
  readonly now?: () => number;
}

/** A bounded, short-lived map from a token's hash to its resolved caller. */
export interface CallerCache {
  get(token: string): CachedCaller | undefined;
  set(token: string, caller: CachedCaller): void;
  delete(token: string): void;
  /** Forgets every caller (a write in this process changed who may do what). */
  clear(): void;
  readonly size: number;
}

/** The default TTL: also the bound on how long an edited AccessPolicy or Project takes to apply. */
export const DEFAULT_CALLER_TTL_MS = 5_000;
const DEFAULT_MAX_ENTRIES = 1_000;

interface Entry {
  readonly caller: CachedCaller;
  readonly expiresAt: number;
}

/** Creates an empty caller cache. */
export function createCallerCache(options: CallerCacheOptions = {}): CallerCache {
  const ttlMs = options.ttlMs ?? DEFAULT_CALLER_TTL_MS;
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const now = options.now ?? Date.now;
  // A Map iterates in insertion order: re-inserting on a hit keeps the least recently used first.
  const entries = new Map<string, Entry>();
  return {
    get: (token) => {
      const key = keyOf(token);
      const entry = entries.get(key);
      if (!entry) {
        return undefined;
      }
      entries.delete(key);
      if (now() >= entry.expiresAt) {
        return undefined;
      }
      entries.set(key, entry);
      return entry.caller;
    },
    set: (token, caller) => {
      if (ttlMs <= 0 || maxEntries <= 0) {
        return;
      }
      // jose treats a token as expired once the current second reaches `exp`; the entry ends then too.
      const tokenExpiresAt = typeof caller.claims.exp === 'number' ? caller.claims.exp * 1000 : 0;
      const expiresAt = Math.min(now() + ttlMs, tokenExpiresAt);
      const key = keyOf(token);
      entries.delete(key);
      entries.set(key, { caller, expiresAt });
      while (entries.size > maxEntries) {
        const oldest = entries.keys().next().value;
        if (oldest === undefined) {
          break;
        }
        entries.delete(oldest);
      }
    },
    delete: (token) => {
      entries.delete(keyOf(token));
    },
    clear: () => entries.clear(),
    get size() {
      return entries.size;
    },
  };
}

function keyOf(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}
