/**
 * What an access token resolved to, kept for a few seconds so that a client's next requests skip the RS256
 * verification and the reads of the project and AccessPolicies. Keyed by a SHA-256 of the token, never the token
 * text. An entry ends at the token's own expiry or after the TTL, whichever comes first; the least recently used
 * goes when the cache is full. What revokes a caller (its Login, its membership) is re-read on every hit by the
 * caller of this cache; the rest (project, policy contents) is as old as the TTL at most.
 */
import type { CallerContext } from '../../../host.ts';
import { createTokenCache, type TokenCache, type TokenCacheOptions } from '../../../http/token-cache.ts';
import type { AccessTokenClaims } from './access-tokens.ts';

/** A resolved caller and what it was resolved from. */
export interface CachedCaller {
  readonly claims: AccessTokenClaims;
  /** Its membership's `meta.versionId` is the version the policy was built from. */
  readonly context: CallerContext;
}

/** How long (default 5,000 ms; 0 turns the cache off) and how many callers are kept. */
export type CallerCacheOptions = Partial<TokenCacheOptions>;

/** A bounded, short-lived map from a token's hash to its resolved caller. */
export type CallerCache = TokenCache<CachedCaller>;

/** The default TTL: also the bound on how long an edited AccessPolicy or Project takes to apply. */
export const DEFAULT_CALLER_TTL_MS = 5_000;

/** Creates an empty caller cache; an entry ends at the token's `exp` at the latest. */
export function createCallerCache(options: CallerCacheOptions = {}): CallerCache {
  return createTokenCache<CachedCaller>({ ttlMs: DEFAULT_CALLER_TTL_MS, ...options });
}
