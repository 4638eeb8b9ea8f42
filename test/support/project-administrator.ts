/**
 * A project's administrator for end-to-end tests: the project's integration client, its membership made `admin`
 * (as an administrator ticks *Admin* in the Medplum app), signed in with MedplumClient. It edits the project's
 * settings and AccessPolicies and reads its records, as a project administrator does in Medplum.
 */
import { MedplumClient } from '@medplum/core';
import type { ProjectMembership } from '@medplum/fhirtypes';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import type { TestHost } from './test-host.ts';

/** Makes the project's client an administrator and signs it in. */
export async function projectAdministrator(host: TestHost, project: SeededProject): Promise<MedplumClient> {
  const membership = await host.store.readResource<ProjectMembership>('ProjectMembership', project.ids['client-membership']);
  await host.store.updateResource<ProjectMembership>({ ...membership, admin: true });
  const admin = new MedplumClient({ baseUrl: host.url, fetch });
  await admin.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  return admin;
}
