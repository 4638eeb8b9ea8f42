/**
 * What a bearer token was verified to mean, kept for a while so that the next requests with the same token skip
 * the signature check. Keyed by a SHA-256 of the token, never the token text. An entry ends at the token's own
 * expiry or after the TTL, whichever comes first; the least recently used goes when the cache is full. Only what
 * the token itself says belongs here: whatever can revoke a caller later (its Login, its Device) is for the user
 * of the cache to read again on each request.
 */
import { hash } from 'node:crypto';

/** How long and how many tokens are kept. */
export interface TokenCacheOptions {
  /** Milliseconds an entry lives at most; 0 turns the cache off. */
  readonly ttlMs: number;
  /** Entries kept at most (default 1,000). */
  readonly maxEntries?: number;
  /** The clock, in epoch milliseconds (tests). */
  readonly now?: () => number;
}

/** A bounded map from a token's hash to what it was verified to mean. */
export interface TokenCache<T> {
  get(token: string): T | undefined;
  /** Keeps `value` until `expiresAtSeconds` (the token's `exp`) or the TTL, whichever is first. */
  set(token: string, value: T, expiresAtSeconds: number | undefined): void;
  delete(token: string): void;
  /** Forgets every entry. */
  clear(): void;
  readonly size: number;
}

const DEFAULT_MAX_ENTRIES = 1_000;

/** Creates an empty token cache. */
export function createTokenCache<T>(options: TokenCacheOptions): TokenCache<T> {
  const { ttlMs } = options;
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const now = options.now ?? ((): number => Date.now());
  // A Map iterates in insertion order: re-inserting on a hit keeps the least recently used first.
  const entries = new Map<string, { readonly value: T; readonly expiresAt: number }>();
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
      return entry.value;
    },
    set: (token, value, expiresAtSeconds) => {
      if (ttlMs <= 0 || maxEntries <= 0) {
        return;
      }
      // jose treats a token as expired once the current second reaches `exp`; the entry ends then too.
      const expiresAt = Math.min(now() + ttlMs, typeof expiresAtSeconds === 'number' ? expiresAtSeconds * 1000 : 0);
      const key = keyOf(token);
      entries.delete(key);
      if (expiresAt <= now()) {
        // Already over (or no expiry to bound it): kept, it would only push out a live entry.
        return;
      }
      entries.set(key, { value, expiresAt });
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
  // The one-shot hash: about half the cost of a Hash object, on every authenticated request.
  return hash('sha256', token, 'base64url');
}
