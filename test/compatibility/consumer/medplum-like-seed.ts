/**
 * The clinic the compatibility test talks to: one project, two patients (one in Alice's care team), a chart for
 * the care-team patient, the AI's device-to-be, a sensor Device, and the callers whose answers broke when fhirgate
 * ran on a copy of Medplum other than the server's:
 * - alice: a practitioner with a care-team policy (one patient) and her own conversations;
 * - bob: a practitioner with only his own conversations (Alice's are hidden from him);
 * - carol: may read Communications but not create them;
 * - dave: no AccessPolicy, but a FHIR quota of 50 points a minute (a chat turn needs more);
 * - integration: a ClientApplication without an AccessPolicy.
 */
import type { WithId } from '@medplum/core';
import type { MemoryRepository } from '@medplum/fhir-router';
import type { AccessPolicy, ClientApplication, Login, Patient, Practitioner, Project, ProjectMembership, Resource } from '@medplum/fhirtypes';

/** One caller as the server knows it. */
export interface SeededCaller {
  readonly login: WithId<Login>;
  readonly membership: WithId<ProjectMembership> & { profile: { reference: string } };
  readonly accessPolicy?: AccessPolicy;
  readonly quotaPoints?: number;
}

/** What was seeded. */
export interface SeededClinic {
  readonly project: WithId<Project>;
  readonly callers: Record<'alice' | 'bob' | 'carol' | 'dave' | 'integration', SeededCaller>;
  readonly deviceId: string;
  readonly deviceIdentifierSystem: string;
  readonly ids: Record<string, string>;
  /** Each ClientApplication's secret, by its id, as the server compares it for Basic auth. */
  readonly clientSecrets: Record<string, string>;
}

const DEVICE_SYSTEM = 'urn:example:devices';

/** Seeds the clinic into `store` (the system's view: no policy applies). */
export async function seedClinic(store: MemoryRepository, deviceKey: string): Promise<SeededClinic> {
  const project = await store.createResource<Project>({ resourceType: 'Project', name: 'compatibility clinic' });
  const create = <T extends Resource>(resource: T): Promise<WithId<T>> => store.createResource({ ...resource, meta: { ...resource.meta, project: project.id } });

  const carePatient = await create<Patient>({ resourceType: 'Patient', name: [{ given: ['Cara'], family: 'Care' }], birthDate: '1961-04-02', gender: 'female' });
  const otherPatient = await create<Patient>({ resourceType: 'Patient', name: [{ given: ['Otto'], family: 'Other' }] });
  await create({
    resourceType: 'Condition',
    subject: { reference: `Patient/${carePatient.id}` },
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
    code: { text: 'Essential hypertension' },
    onsetDateTime: '2021-03-04',
  });
  await create({
    resourceType: 'Observation',
    status: 'final',
    subject: { reference: `Patient/${carePatient.id}` },
    code: { text: 'Heart rate' },
    effectiveDateTime: new Date().toISOString().slice(0, 10),
    valueQuantity: { value: 72, unit: '/min' },
  });
  const device = await create({ resourceType: 'Device', status: 'active', identifier: [{ system: DEVICE_SYSTEM, value: 'sensor-1' }] });

  const practitioner = async (name: string): Promise<WithId<Practitioner>> => create<Practitioner>({ resourceType: 'Practitioner', name: [{ given: [name], family: 'Compat' }] });
  const alice = await practitioner('Alice');
  const bob = await practitioner('Bob');
  const carol = await practitioner('Carol');
  const dave = await practitioner('Dave');
  const client = await create<ClientApplication>({ resourceType: 'ClientApplication', name: 'compatibility integration', secret: 'compatibility-client-secret' });

  const ownConversations = (profile: string): AccessPolicy['resource'] => [
    { resourceType: 'Communication', criteria: `Communication?subject:missing=true&sender=${profile}` },
    { resourceType: 'Communication', criteria: `Communication?subject:missing=true&recipient=${profile}` },
    { resourceType: 'Practitioner', criteria: `Practitioner?_id=${profile.split('/')[1]}`, readonly: true },
  ];
  const carePolicy: AccessPolicy = {
    resourceType: 'AccessPolicy',
    resource: [
      { resourceType: 'Patient', criteria: `Patient?_id=${carePatient.id}`, readonly: true },
      { resourceType: 'Communication', criteria: `Communication?subject=Patient/${carePatient.id}` },
      { resourceType: 'Observation', criteria: `Observation?subject=Patient/${carePatient.id}`, readonly: true },
      { resourceType: 'Condition', criteria: `Condition?subject=Patient/${carePatient.id}`, readonly: true },
      ...(ownConversations(`Practitioner/${alice.id}`) ?? []),
    ],
  };

  const caller = async (profile: Resource & { id: string }, accessPolicy?: AccessPolicy, quotaPoints?: number): Promise<SeededCaller> => {
    const membership = await create<ProjectMembership>({
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${project.id}` },
      user: { reference: `User/${profile.id}` },
      profile: { reference: `${profile.resourceType}/${profile.id}` },
    });
    const login = await store.createResource<Login>({
      resourceType: 'Login',
      user: { reference: `User/${profile.id}` },
      membership: { reference: `ProjectMembership/${membership.id}` },
      authMethod: 'password',
      authTime: new Date().toISOString(),
      granted: true,
    });
    return { login, membership: membership as SeededCaller['membership'], accessPolicy, quotaPoints };
  };

  return {
    project,
    callers: {
      alice: await caller(alice, carePolicy),
      bob: await caller(bob, { resourceType: 'AccessPolicy', resource: ownConversations(`Practitioner/${bob.id}`) }),
      carol: await caller(carol, {
        resourceType: 'AccessPolicy',
        resource: [
          { resourceType: 'Communication', readonly: true },
          { resourceType: 'Practitioner', readonly: true },
        ],
      }),
      dave: await caller(dave, undefined, 50),
      integration: await caller(client),
    },
    deviceId: 'sensor-1',
    deviceIdentifierSystem: DEVICE_SYSTEM,
    ids: { project: project.id, carePatient: carePatient.id, otherPatient: otherPatient.id, device: device.id, alice: alice.id, client: client.id },
    clientSecrets: { [client.id]: client.secret ?? '' },
  };
}
