/**
 * The demo project's administrator client (`npm run -s token -- --admin-client`): a ClientApplication whose
 * membership is `admin`, for the tools that act as a project administrator would on a Medplum server
 * (`fhirgate provision`, `npm run e2e`), and whose access token `npm run -s token -- --admin` prints (the usage
 * report, the project's settings). Made the first time it is asked for, with a generated secret, and reused
 * after; only someone with the data folder can print it.
 */
import { randomBytes } from 'node:crypto';
import type { FhirRepository } from '@medplum/fhir-router';
import type { ClientApplication, ProjectMembership } from '@medplum/fhirtypes';

// Fixed ids beside the demo fixture's own, so the client is found again without a search.
const CLIENT_ID = 'a1f0c0de-0000-4000-8000-000000000611';
const MEMBERSHIP_ID = 'a1f0c0de-0000-4000-8000-000000000612';

/** The administrator client of `projectId`, created if missing (with other `ids` in a project of a test's own). */
export async function ensureAdminClient(
  store: FhirRepository,
  projectId: string,
  ids: { readonly clientId: string; readonly membershipId: string } = { clientId: CLIENT_ID, membershipId: MEMBERSHIP_ID }
): Promise<{ readonly id: string; readonly secret: string; readonly membershipId: string }> {
  const existing = await store.readResource<ClientApplication>('ClientApplication', ids.clientId).catch(() => undefined);
  if (existing?.secret) {
    return { id: existing.id, secret: existing.secret, membershipId: ids.membershipId };
  }
  const client = await store.createResource<ClientApplication>(
    {
      resourceType: 'ClientApplication',
      id: ids.clientId,
      meta: { project: projectId },
      name: 'fhirgate demo administrator',
      description: 'Project administrator of the demo project, for fhirgate provision and the end-to-end suite.',
      secret: randomBytes(32).toString('hex'),
    },
    { assignedId: true }
  );
  await store.createResource<ProjectMembership>(
    {
      resourceType: 'ProjectMembership',
      id: ids.membershipId,
      meta: { project: projectId },
      project: { reference: `Project/${projectId}` },
      user: { reference: `ClientApplication/${client.id}` },
      profile: { reference: `ClientApplication/${client.id}` },
      admin: true,
    },
    { assignedId: true }
  );
  return { id: client.id, secret: client.secret ?? '', membershipId: ids.membershipId };
}
