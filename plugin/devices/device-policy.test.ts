/**
 * The device's AccessPolicy as Medplum decides it, without fhirgate's guard in front: `satisfiedAccessPolicy` of
 * `@medplum/core` is what a Medplum server's repository asks before every write and read (fhir/repo.ts
 * `canPerformInteraction`); and Medplum's GraphQL engine over the standalone host's repository under that policy.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { AccessPolicyInteraction, satisfiedAccessPolicy } from '@medplum/core';
import type { AccessPolicy, Observation } from '@medplum/fhirtypes';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';
import { executeGraphql } from '../graphql/execute-graphql.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { ProjectRepository } from '../hosts/standalone/project-repository.ts';
import { buildDevicePolicy } from './device-services.ts';

const DEVICE = 'dev-1';

function observation(fields: Partial<Observation> = {}): Observation {
  return { resourceType: 'Observation', status: 'final', code: { text: 'pulse' }, device: { reference: `Device/${DEVICE}` }, ...fields };
}

function allows(policy: AccessPolicy, resource: Observation, interaction: AccessPolicyInteraction = AccessPolicyInteraction.CREATE): boolean {
  return satisfiedAccessPolicy(resource, interaction, policy) !== undefined;
}

describe('buildDevicePolicy, decided by Medplum', () => {
  beforeAll(() => loadFhirDefinitions());

  test('a device assigned to a patient writes and reads about that patient, itself and no one', () => {
    const policy = buildDevicePolicy(DEVICE, 'p-1');
    for (const interaction of [AccessPolicyInteraction.CREATE, AccessPolicyInteraction.READ, AccessPolicyInteraction.SEARCH]) {
      expect(allows(policy, observation({ subject: { reference: 'Patient/p-1' } }), interaction)).toBe(true);
      expect(allows(policy, observation({ subject: { reference: `Device/${DEVICE}` } }), interaction)).toBe(true);
      expect(allows(policy, observation(), interaction)).toBe(true);
    }
  });

  test.each<[string, Partial<Observation>]>([
    ['another patient', { subject: { reference: 'Patient/p-2' } }],
    ['a Group', { subject: { reference: 'Group/g-1' } }],
    ['another Device', { subject: { reference: 'Device/dev-2' } }],
    ['its patient with another patient as performer (the patient compartment)', { subject: { reference: 'Patient/p-1' }, performer: [{ reference: 'Patient/p-2' }] }],
    ['no subject and a performer', { performer: [{ reference: 'Practitioner/x' }] }],
    ['its patient, as another device', { subject: { reference: 'Patient/p-1' }, device: { reference: 'Device/dev-2' } }],
  ])('an Observation about %s is neither written nor read', (_name, fields) => {
    const policy = buildDevicePolicy(DEVICE, 'p-1');
    expect(allows(policy, observation(fields))).toBe(false);
    expect(allows(policy, observation(fields), AccessPolicyInteraction.READ)).toBe(false);
  });

  test('with no patient assigned, a patient is refused; after reassignment, the previous patient is', () => {
    expect(allows(buildDevicePolicy(DEVICE), observation({ subject: { reference: 'Patient/p-1' } }))).toBe(false);
    expect(allows(buildDevicePolicy(DEVICE), observation())).toBe(true);
    const moved = buildDevicePolicy(DEVICE, 'p-2');
    expect(allows(moved, observation({ subject: { reference: 'Patient/p-1' } }), AccessPolicyInteraction.READ)).toBe(false);
    expect(allows(moved, observation({ subject: { reference: 'Patient/p-2' } }))).toBe(true);
  });

  test('updates and deletes are never allowed; the device reads its own Device only', () => {
    const policy = buildDevicePolicy(DEVICE, 'p-1');
    expect(allows(policy, observation({ subject: { reference: 'Patient/p-1' } }), AccessPolicyInteraction.UPDATE)).toBe(false);
    expect(allows(policy, observation(), AccessPolicyInteraction.DELETE)).toBe(false);
    expect(satisfiedAccessPolicy({ resourceType: 'Device', id: DEVICE }, AccessPolicyInteraction.READ, policy)).toBeDefined();
    expect(satisfiedAccessPolicy({ resourceType: 'Device', id: 'dev-2' }, AccessPolicyInteraction.READ, policy)).toBeUndefined();
  });
});

describe("the device's AccessPolicy on Medplum's GraphQL engine, the guard aside", () => {
  const PROJECT = 'project-devices';
  const store = new MemoryRepository();
  const router = new FhirRouter();
  const CREATE = 'mutation($res: ObservationCreate!) { ObservationCreate(res: $res) { id } }';

  beforeAll(() => loadFhirDefinitions());

  function deviceRepo(assignedPatientId?: string): ProjectRepository {
    return new ProjectRepository(store, { projectId: PROJECT, author: { reference: `Device/${DEVICE}` }, accessPolicy: buildDevicePolicy(DEVICE, assignedPatientId) });
  }

  async function stored(): Promise<Observation[]> {
    return store.searchResources<Observation>({ resourceType: 'Observation' });
  }

  test('a write about another patient, or with a performer, is FORBIDDEN and stores nothing; its own patient is stored', async () => {
    const repo = deviceRepo('p-1');
    for (const fields of [{ subject: { reference: 'Patient/p-2' } }, { subject: { reference: 'Patient/p-1' }, performer: [{ reference: 'Patient/p-2' }] }]) {
      const refused = await executeGraphql(router, repo, { query: CREATE, variables: { res: observation(fields) } });
      expect(refused).toEqual({ data: { ObservationCreate: null }, errors: [expect.objectContaining({ extensions: { code: 'FORBIDDEN' } })] });
    }
    expect(await stored()).toEqual([]);

    const own = await executeGraphql(router, repo, { query: CREATE, variables: { res: observation({ subject: { reference: 'Patient/p-1' } }) } });
    expect(own.errors).toBeUndefined();
    expect((await stored()).map((item) => item.subject?.reference)).toEqual(['Patient/p-1']);
  }, 120_000);

  test('after reassignment the device no longer lists what it wrote about the previous patient', async () => {
    const listed = async (assignedPatientId: string): Promise<unknown> =>
      (await executeGraphql(router, deviceRepo(assignedPatientId), { query: '{ ObservationList { subject { reference } } }', variables: {} })).data?.ObservationList;
    await deviceRepo('p-1').createResource(observation({ subject: { reference: 'Patient/p-1' } }));
    expect(await listed('p-1')).toContainEqual({ subject: { reference: 'Patient/p-1' } });
    // Medplum's GraphQL answers null for a list whose search bundle has no entry at all.
    expect((await listed('p-3')) ?? []).toEqual([]);
  });
});
