import type { FhirRepository } from '@medplum/fhir-router';
import type { IncomingHttpHeaders } from 'node:http';
import type { CallerContext } from '../../../host.ts';
import type { AccessTokenService } from './access-tokens.ts';
import { resolveCaller } from './logins.ts';

/** The bearer token of a request, or undefined when the Authorization header carries none. */
export function readBearerToken(headers: IncomingHttpHeaders): string | undefined {
  const header = headers.authorization;
  if (!header) {
    return undefined;
  }
  const [scheme, token, ...rest] = header.trim().split(/\s+/);
  return scheme?.toLowerCase() === 'bearer' && token && rest.length === 0 ? token : undefined;
}

/** Authenticates a request as Medplum's `authenticateRequest` does: a verified access token of a live login. */
export async function authenticateRequest(
  headers: IncomingHttpHeaders,
  store: FhirRepository,
  tokens: AccessTokenService
): Promise<CallerContext | undefined> {
  const token = readBearerToken(headers);
  if (!token) {
    return undefined;
  }
  const claims = await tokens.verify(token);
  return claims ? resolveCaller(store, claims) : undefined;
}
