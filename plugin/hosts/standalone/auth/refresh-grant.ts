/**
 * The refresh_token grant, as Medplum's: a refresh token (issued to a sign-in with "Remember me") renews the
 * session of its Login while the Login is granted and not revoked, its membership active, and the token carries the
 * Login's current refresh secret; each use rotates the secret, so a refresh token serves once.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Login, ProjectMembership } from '@medplum/fhirtypes';
import type { WithId } from '@medplum/core';
import type { AccessTokenService } from './access-tokens.ts';
import { signLoginToken, type IssuedLogin } from './logins.ts';

/** A renewed session: the access token, its new refresh token, and the membership it is for. */
export interface RefreshedLogin extends IssuedLogin {
  readonly refreshToken: string;
  readonly membership: WithId<ProjectMembership>;
}

/** Renews the session of `token`; an OAuth error when it cannot be renewed (never saying which check failed). */
export async function refreshLogin(
  store: FhirRepository,
  tokens: AccessTokenService,
  token: unknown
): Promise<RefreshedLogin | { error: string; description: string }> {
  const invalid = { error: 'invalid_grant', description: 'Invalid or expired refresh token.' };
  const claims = typeof token === 'string' && token ? await tokens.verifyRefresh(token) : undefined;
  if (!claims) {
    return invalid;
  }
  const login = await store.readResource<Login>('Login', claims.login_id).catch(() => undefined);
  if (!login || login.revoked || !login.granted || !login.membership || !login.refreshSecret || !sameSecret(login.refreshSecret, claims.refresh_secret)) {
    return invalid;
  }
  const membership = await store.readReference<ProjectMembership>(login.membership).catch(() => undefined);
  if (!membership || membership.active === false) {
    return invalid;
  }
  const renewed = await store.updateResource<Login>({ ...login, refreshSecret: randomBytes(32).toString('hex') });
  return {
    login: renewed,
    membership,
    ...(await signLoginToken(tokens, renewed, membership)),
    refreshToken: await tokens.signRefresh(renewed.id, renewed.refreshSecret as string),
  };
}

function sameSecret(stored: string, presented: string): boolean {
  const [a, b] = [Buffer.from(stored), Buffer.from(presented)];
  return a.length === b.length && timingSafeEqual(a, b);
}
