/**
 * Logins and the caller behind an access token, as Medplum's `getLoginForAccessToken`: the token names a
 * `Login`; a revoked login, or one without an active membership, authenticates nobody; the membership gives
 * the project, the profile and the AccessPolicy of the caller's repository.
 */
import { createReference, type ProfileResource, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { ClientApplication, Login, Project, ProjectMembership, Reference, User } from '@medplum/fhirtypes';
import type { CallerContext } from '../../../host.ts';
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
  const userId = membership.user?.reference?.split('/')[1] ?? membership.id;
  const accessToken = await tokens.sign({
    login_id: login.id,
    sub: userId,
    username: userId,
    scope,
    profile: membership.profile.reference ?? '',
    client_id: request.client?.reference?.split('/')[1],
  });
  return { login, accessToken, expiresInSeconds: tokens.lifetimeSeconds };
}

/** Resolves the caller of verified token claims; undefined when the login no longer authenticates anyone. */
export async function resolveCaller(store: FhirRepository, claims: AccessTokenClaims): Promise<CallerContext | undefined> {
  const login = await readOrUndefined<Login>(store, 'Login', claims.login_id);
  if (!login || login.revoked || !login.granted || !login.membership) {
    return undefined;
  }
  const membership = await readOrUndefined<ProjectMembership>(store, login.membership);
  if (!membership || membership.active === false || membership.profile.reference !== claims.profile) {
    return undefined;
  }
  const project = await readOrUndefined<Project>(store, membership.project);
  if (!project) {
    return undefined;
  }
  const accessPolicy = await buildAccessPolicy(membership, (reference) => store.readReference(reference));
  const profile = membership.profile as Reference<ProfileResource>;
  const repo = new ProjectRepository(store, { projectId: project.id, author: profile, accessPolicy });
  return { repo, project, membership, profile, login };
}

async function readOrUndefined<T extends Login | ProjectMembership | Project>(
  store: FhirRepository,
  typeOrReference: string | Reference,
  id?: string
): Promise<WithId<T> | undefined> {
  try {
    return typeof typeOrReference === 'string'
      ? await store.readResource<T>(typeOrReference, id ?? '')
      : await store.readReference<T>(typeOrReference as Reference<T>);
  } catch {
    return undefined;
  }
}
