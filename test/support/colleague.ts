/**
 * A colleague of the demo practitioner: a second practitioner of the project whose care team has the same patient
 * (the ready-made policy), signed in. With it he may read every conversation about the patient and record prompts
 * about her, as every member of a care team may.
 */
import type { Practitioner, ProjectMembership, User } from '@medplum/fhirtypes';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import type { TestHost } from './test-host.ts';

export interface Colleague {
  /** `Practitioner/<id>`. */
  readonly profile: string;
  readonly token: string;
}

/** Creates the colleague (Colin Colleague) in `project`, in the care team of `patientId`, and signs him in. */
export async function colleagueOf(host: TestHost, project: SeededProject, patientId: string): Promise<Colleague> {
  const system = await host.standalone.host.getSystemRepo(project.projectId);
  const practitioner = await system.createResource<Practitioner>({ resourceType: 'Practitioner', name: [{ given: ['Colin'], family: 'Colleague' }] });
  const user = await system.createResource<User>({ resourceType: 'User', firstName: 'Colin', lastName: 'Colleague', email: `colin.${practitioner.id}@example.com` });
  const membership = await system.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    project: { reference: `Project/${project.projectId}` },
    user: { reference: `User/${user.id}` },
    profile: { reference: `Practitioner/${practitioner.id}` },
    access: [
      { policy: { reference: `AccessPolicy/${project.ids['policy-own-conversations']}` } },
      { policy: { reference: `AccessPolicy/${project.ids['policy-care-team-patient']}` }, parameter: [{ name: 'patient', valueReference: { reference: `Patient/${patientId}` } }] },
    ],
  });
  return { profile: `Practitioner/${practitioner.id}`, token: await host.accessTokenFor(membership.id) };
}
