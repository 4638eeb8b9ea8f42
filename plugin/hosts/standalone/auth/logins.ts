/**
 * Logins and the caller behind an access token, as Medplum's `getLoginForAccessToken`: the token names a
 * `Login`; a revoked login, or one without an active membership, authenticates nobody; the membership gives
 * the project, the profile and the AccessPolicy of the caller's repository.
 */
import { createReference, type ProfileResource, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { ClientApplication, Login, Project, ProjectMembership, Reference, User } from '@medplum/fhirtypes';
import type { CallerContext } from '../../../host.ts';
import { isOutcomeStatus } from '../../../medplum-errors.ts';
import { ProjectRepository } from '../project-repository.ts';
import type { AccessTokenClaims, AccessTokenService } from './access-tokens.ts';
import { buildAccessPolicy } from './access-policy.ts';

/** How a login was started. */
export type LoginMethod = Login['authMethod'];

/** What a login is started for. */
export interface StartLoginRequest {
  readonly membership: WithId<ProjectMembership>;
  readonly authMethod: LoginMethod;
  readonly client?: Reference<ClientApplication>;
  readonly scope?: string;
  readonly remoteAddress?: string;
}

/** A started login and its access token. */
export interface IssuedLogin {
  readonly login: WithId<Login>;
  readonly accessToken: string;
  readonly expiresInSeconds: number;
}

/** Creates a Login for a membership and signs its access token. */
export async function startLogin(store: FhirRepository, tokens: AccessTokenService, request: StartLoginRequest): Promise<IssuedLogin> {
  const { membership } = request;
  const scope = request.scope ?? 'openid';
  const login = await store.createResource<Login>({
    resourceType: 'Login',
    meta: { project: membership.project.reference?.replace('Project/', '') },
    user: membership.user as Reference<User | ClientApplication>,
    membership: createReference(membership),
    project: membership.project,
    client: request.client,
    profileType: membership.profile.reference?.split('/')[0] as Login['profileType'],
    authMethod: request.authMethod,
    authTime: new Date().toISOString(),
    scope,
    granted: true,
    remoteAddress: request.remoteAddress,
  });
  return { login, ...(await signLoginToken(tokens, login, membership)) };
}

/** Signs the access token of a granted login, for its membership (both grants of `/oauth2/token` end here). */
export async function signLoginToken(
  tokens: AccessTokenService,
  login: WithId<Login>,
  membership: WithId<ProjectMembership>
): Promise<Omit<IssuedLogin, 'login'>> {
  const userId = membership.user?.reference?.split('/')[1] ?? membership.id;
  const accessToken = await tokens.sign({
    login_id: login.id,
    sub: userId,
    username: userId,
    scope: login.scope ?? 'openid',
    profile: membership.profile.reference ?? '',
    client_id: login.client?.reference?.split('/')[1],
  });
  return { accessToken, expiresInSeconds: tokens.lifetimeSeconds };
}

/** Options of caller resolution. */
export interface ResolveCallerOptions {
  /** Called after the caller's repository writes a resource (so cached callers can be dropped). */
  readonly onWrite?: (resourceType: string) => void;
}

/** Resolves the caller of verified token claims; undefined when the login no longer authenticates anyone. */
export async function resolveCaller(
  store: FhirRepository,
  claims: AccessTokenClaims,
  options: ResolveCallerOptions = {}
): Promise<CallerContext | undefined> {
  const live = await readLiveLoginAndMembership(store, claims);
  if (!live) {
    return undefined;
  }
  const { login, membership } = live;
  const project = await readOrUndefined<Project>(store, membership.project);
  if (!project) {
    return undefined;
  }
  const accessPolicy = await buildAccessPolicy(membership, (reference) => store.readReference(reference));
  const profile = membership.profile as Reference<ProfileResource>;
  const repo = new ProjectRepository(store, { projectId: project.id, author: profile, accessPolicy, onWrite: options.onWrite });
  return { repo, project, membership, profile, login };
}

/**
 * Re-checks a caller resolved earlier from the same claims: the Login and the membership are read again (two
 * indexed reads), so a revoked login or a deactivated membership stops the caller at once; the repository, the
 * project and the policy are reused while the membership is the version they were built from. Undefined when
 * the caller no longer authenticates; `stale` when the membership changed and the caller must be resolved again.
 */
export async function recheckCaller(
  store: FhirRepository,
  claims: AccessTokenClaims,
  cached: CallerContext
): Promise<CallerContext | 'stale' | undefined> {
  const live = await readLiveLoginAndMembership(store, claims);
  if (!live) {
    return undefined;
  }
  if (live.membership.id !== cached.membership.id || live.membership.meta?.versionId !== cached.membership.meta?.versionId) {
    return 'stale';
  }
  return { ...cached, login: live.login, membership: live.membership };
}

/** The Login named by the claims and its membership, when both still authenticate the token's profile. */
async function readLiveLoginAndMembership(
  store: FhirRepository,
  claims: AccessTokenClaims
): Promise<{ login: WithId<Login>; membership: WithId<ProjectMembership> } | undefined> {
  const login = await readOrUndefined<Login>(store, 'Login', claims.login_id);
  if (!login || login.revoked || !login.granted || !login.membership) {
    return undefined;
  }
  const membership = await readOrUndefined<ProjectMembership>(store, login.membership);
  if (!membership || membership.active === false || membership.profile.reference !== claims.profile) {
    return undefined;
  }
  return { login, membership };
}

/** A resource by type and id or by reference; undefined when missing or deleted (a failing store's error goes on). */
export async function readOrUndefined<T extends Login | ProjectMembership | Project | ClientApplication>(
  store: FhirRepository,
  typeOrReference: string | Reference,
  id?: string
): Promise<WithId<T> | undefined> {
  try {
    return typeof typeOrReference === 'string'
      ? await store.readResource<T>(typeOrReference, id ?? '')
      : await store.readReference<T>(typeOrReference as Reference<T>);
  } catch (error) {
    // Missing, deleted or not a reference: nobody is authenticated. A store that fails is not a caller who does not
    // exist: its error goes on (503 for a store whose file is gone), never a 401 that makes a client drop its token.
    if (isOutcomeStatus(error, 400, 404, 410)) {
      return undefined;
    }
    throw error;
  }
}
