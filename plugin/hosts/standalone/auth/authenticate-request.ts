import type { FhirRepository } from '@medplum/fhir-router';
import type { IncomingHttpHeaders } from 'node:http';
import type { CallerContext } from '../../../host.ts';
import type { AccessTokenService } from './access-tokens.ts';
import type { CallerCache } from './caller-cache.ts';
import { recheckCaller, resolveCaller } from './logins.ts';
import { readBearerToken } from '../../../http/bearer-token.ts';
import { readClientKey } from '../../../http/client-key.ts';
import { authenticateClientKey } from './client-keys.ts';

export { readBearerToken };

// The resource types a caller is resolved from: a write to one of them in this process drops every cached caller.
const CALLER_SOURCE_TYPES = new Set(['Login', 'ProjectMembership', 'Project', 'AccessPolicy']);

/**
 * Authenticates a request as Medplum's `authenticateRequest` does: a verified access token of a live login, or a
 * ClientApplication's id and secret (Basic auth, or the API key `Bearer <client id>:<secret>`: client-keys.ts).
 * With a cache, a token seen in the last seconds skips the signature check (the same bytes were verified; its
 * expiry still applies) and the policy build, but its Login and membership are read again every time.
 */
export async function authenticateRequest(
  headers: IncomingHttpHeaders,
  store: FhirRepository,
  tokens: AccessTokenService,
  callers?: CallerCache
): Promise<CallerContext | undefined> {
  const onWrite = callers ? (resourceType: string): void => dropCallersOnSourceWrite(callers, resourceType) : undefined;
  const key = readClientKey(headers);
  if (key) {
    // Checked every time, never cached: a rotated secret stops the key at its next request.
    return authenticateClientKey(store, key, { onWrite });
  }
  const token = readBearerToken(headers);
  if (!token) {
    return undefined;
  }
  const cached = callers?.get(token);
  if (cached) {
    const rechecked = await recheckCaller(store, cached.claims, cached.context);
    if (rechecked !== 'stale') {
      if (!rechecked) {
        callers?.delete(token);
      }
      return rechecked;
    }
  }
  const claims = await tokens.verify(token);
  if (!claims) {
    return undefined;
  }
  const caller = await resolveCaller(store, claims, { onWrite });
  if (caller && callers) {
    callers.set(token, { claims, context: caller }, claims.exp);
  } else if (!caller) {
    callers?.delete(token);
  }
  return caller;
}

function dropCallersOnSourceWrite(callers: CallerCache, resourceType: string): void {
  if (CALLER_SOURCE_TYPES.has(resourceType)) {
    callers.clear();
  }
}
