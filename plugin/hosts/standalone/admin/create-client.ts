/**
 * A project administrator's new ClientApplication, as Medplum's `POST /admin/projects/:projectId/client`
 * (admin/client.ts) makes it: the client with a generated secret (32 random bytes, hex, as Medplum's
 * `generateSecret(32)`), and its ProjectMembership in the project (user and profile the client) with the given
 * AccessPolicy. Answered 201 with the ClientApplication, its secret included: the administrator hands
 * `<id>:<secret>` to the person or tool as an API key (docs/clients.md).
 */
import { randomBytes } from 'node:crypto';
import { OperationOutcomeError, badRequest, createReference, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AccessPolicy, ClientApplication, Project, ProjectMembership, Reference } from '@medplum/fhirtypes';
import { z } from 'zod';

/** The fields of Medplum's CreateClientRequest this host honours; any other is refused by name. */
export const createClientBody = z
  .object({
    name: z.string().trim().min(1, 'Client name is required').max(200),
    description: z.string().max(2000).optional(),
    redirectUri: z.string().max(2000).optional(),
    accessPolicy: z.object({ reference: z.string().regex(/^AccessPolicy\/[A-Za-z0-9\-.]{1,64}$/), display: z.string().optional() }).optional(),
  })
  .strict();

/** Creates the client and its membership; the AccessPolicy must be the project's. */
export async function createClient(store: FhirRepository, project: WithId<Project>, body: z.infer<typeof createClientBody>): Promise<WithId<ClientApplication>> {
  const { accessPolicy, ...fields } = body;
  if (accessPolicy) {
    // Read first: a policy of another project, or none, is refused before anything is written.
    const policy = await store.readReference<AccessPolicy>(accessPolicy as Reference<AccessPolicy>).catch(() => undefined);
    if (policy?.meta?.project !== project.id) {
      throw new OperationOutcomeError(badRequest(`${accessPolicy.reference} is not an AccessPolicy of this project`, 'accessPolicy'));
    }
  }
  const client = await store.createResource<ClientApplication>({
    resourceType: 'ClientApplication',
    meta: { project: project.id },
    ...fields,
    secret: randomBytes(32).toString('hex'),
  });
  await store.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: project.id },
    project: createReference(project),
    user: createReference(client),
    profile: createReference(client),
    accessPolicy,
  });
  return client;
}
