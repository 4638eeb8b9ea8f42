import type { FhirRepository } from '@medplum/fhir-router';
import type { IncomingHttpHeaders } from 'node:http';
import type { CallerContext } from '../../../host.ts';
import type { AccessTokenService } from './access-tokens.ts';
import { resolveCaller } from './logins.ts';
import { readBearerToken } from '../../../http/bearer-token.ts';

export { readBearerToken };

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
