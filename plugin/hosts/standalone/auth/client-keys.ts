/**
 * A ClientApplication's API key (`<client id>:<secret>`, http/client-key.ts), authenticated as Medplum's
 * `getLoginForBasicAuth` authenticates Basic auth: on every request the ClientApplication is read, its secret
 * compared in constant time and its active membership found, so a rotated or removed secret, a client switched off
 * (`status: off`) or a membership made inactive stops the key at once. The caller is the ClientApplication, under
 * its membership's AccessPolicy, with a Login made for the request alone (no id), as Medplum's.
 */
import { timingSafeEqual } from 'node:crypto';
import { Operator, createReference, type ProfileResource, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { ClientApplication, Login, Project, ProjectMembership, Reference } from '@medplum/fhirtypes';
import type { CallerContext } from '../../../host.ts';
import type { ClientKey } from '../../../http/client-key.ts';
import { ProjectRepository } from '../project-repository.ts';
import { buildAccessPolicy } from './access-policy.ts';
import { readOrUndefined } from './logins.ts';

/** The ClientApplication of a key, when the key's secret is its current one and the client is not switched off. */
export async function readKeyClient(store: FhirRepository, key: ClientKey): Promise<WithId<ClientApplication> | undefined> {
  const client = await readOrUndefined<ClientApplication>(store, 'ClientApplication', key.clientId);
  // As Medplum's getLoginForBasicAuth: the current secret only (not a `retiringSecret`), a status other than active refused.
  return client?.secret && (!client.status || client.status === 'active') && secretsMatch(client.secret, key.secret) ? client : undefined;
}

/** The client's active project membership, if it has one. */
export async function findClientMembership(store: FhirRepository, client: WithId<ClientApplication>): Promise<WithId<ProjectMembership> | undefined> {
  const memberships = await store.searchResources<ProjectMembership>({
    resourceType: 'ProjectMembership',
    filters: [{ code: 'user', operator: Operator.EQUALS, value: `ClientApplication/${client.id}` }],
  });
  return memberships.find((membership) => membership.active !== false);
}

/** The caller of a client key, or undefined when the key authenticates nobody. */
export async function authenticateClientKey(
  store: FhirRepository,
  key: ClientKey,
  options: { readonly onWrite?: (resourceType: string) => void } = {}
): Promise<CallerContext | undefined> {
  const client = await readKeyClient(store, key);
  const membership = client && (await findClientMembership(store, client));
  if (!client || !membership) {
    return undefined;
  }
  const project = await readOrUndefined<Project>(store, membership.project);
  if (!project) {
    return undefined;
  }
  const accessPolicy = await buildAccessPolicy(membership, (reference) => store.readReference(reference));
  const profile = membership.profile as Reference<ProfileResource>;
  const repo = new ProjectRepository(store, { projectId: project.id, author: profile, accessPolicy, onWrite: options.onWrite });
  const login: Login = {
    resourceType: 'Login',
    user: createReference(client),
    client: createReference(client),
    membership: createReference(membership),
    project: createReference(project),
    authMethod: 'client',
    authTime: new Date().toISOString(),
  };
  return { repo, project, membership, profile, login };
}

function secretsMatch(expected: string, given: string): boolean {
  const expectedBytes = Buffer.from(expected);
  const givenBytes = Buffer.from(given);
  return expectedBytes.length === givenBytes.length && timingSafeEqual(expectedBytes, givenBytes);
}
