import { AccessPolicyInteraction, satisfiedAccessPolicy } from '@medplum/core';
import type { AccessPolicy, Resource } from '@medplum/fhirtypes';
import { compileAccessPolicy } from './compiled-access-policy.ts';
import { loadFhirDefinitions } from './fhir-definitions.ts';

const ownConversations: AccessPolicy = {
  resourceType: 'AccessPolicy',
  compartment: { reference: 'Patient/p9' },
  resource: [
    { resourceType: 'Communication', criteria: 'Communication?subject:missing=true&sender=Practitioner/dr', interaction: ['create', 'read', 'search'] },
    { resourceType: 'Communication', criteria: 'Communication?subject:missing=true&recipient=Practitioner/dr', interaction: ['create', 'read', 'search'] },
    { resourceType: 'Communication', criteria: 'Communication?subject=Patient/p1', interaction: ['create', 'read', 'search', 'history'] },
    { resourceType: 'Patient', criteria: 'Patient?_id=p1', readonly: true },
    { resourceType: 'Observation', criteria: 'Observation?subject=Patient/p1&status=final,amended', readonly: true },
    { resourceType: 'Condition', compartment: { reference: 'Patient/p1' } },
    { resourceType: 'Practitioner', criteria: 'Practitioner?_id=dr', readonly: true },
    { resourceType: 'Binary', criteria: 'Binary?_id=never' },
    { resourceType: 'ProjectMembership', criteria: 'ProjectMembership?_project=project-a' },
    { resourceType: '*', readonly: true },
  ],
};

const resources: Resource[] = [
  { resourceType: 'Communication', status: 'completed', sender: { reference: 'Practitioner/dr' } },
  { resourceType: 'Communication', status: 'completed', recipient: [{ reference: 'Practitioner/dr' }] },
  { resourceType: 'Communication', status: 'completed', sender: { reference: 'Practitioner/dr' }, subject: { reference: 'Patient/p2' } },
  { resourceType: 'Communication', status: 'completed', subject: { reference: 'Patient/p1' } },
  { resourceType: 'Communication', status: 'completed', sender: { reference: 'Practitioner/other' } },
  { resourceType: 'Patient', id: 'p1' },
  { resourceType: 'Patient', id: 'p2' },
  { resourceType: 'Observation', status: 'final', code: {}, subject: { reference: 'Patient/p1' } },
  { resourceType: 'Observation', status: 'preliminary', code: {}, subject: { reference: 'Patient/p1' } },
  { resourceType: 'Condition', subject: { reference: 'Patient/p1' }, meta: { compartment: [{ reference: 'Patient/p1' }] } },
  { resourceType: 'Condition', subject: { reference: 'Patient/p2' }, meta: { compartment: [{ reference: 'Patient/p2' }] } },
  { resourceType: 'Practitioner', id: 'dr' },
  { resourceType: 'Binary', contentType: 'text/plain' },
  { resourceType: 'ProjectMembership', meta: { project: 'project-a' }, project: { reference: 'Project/project-a' }, user: { reference: 'User/u1' }, profile: { reference: 'Practitioner/dr' } },
  { resourceType: 'Project', id: 'project-a' },
  { resourceType: 'Device', id: 'd1' },
];

const interactions = Object.values(AccessPolicyInteraction);

describe('compileAccessPolicy', () => {
  beforeAll(() => loadFhirDefinitions());

  test("decides exactly as @medplum/core's satisfiedAccessPolicy, rule for rule", () => {
    const compiled = compileAccessPolicy(ownConversations);
    let allowed = 0;
    for (const resource of resources) {
      for (const interaction of interactions) {
        const expected = satisfiedAccessPolicy(resource, interaction, ownConversations);
        expect({ resource, interaction, rule: compiled.satisfiedBy(resource, interaction) }).toEqual({ resource, interaction, rule: expected });
        allowed += expected ? 1 : 0;
      }
    }
    // The table covers both answers, not only refusals.
    expect(allowed).toBeGreaterThan(20);
    expect(allowed).toBeLessThan(resources.length * interactions.length);
  });

  test('a policy without rules allows nothing, as in Medplum', () => {
    const empty: AccessPolicy = { resourceType: 'AccessPolicy' };
    expect(compileAccessPolicy(empty).satisfiedBy(resources[0], AccessPolicyInteraction.READ)).toBeUndefined();
    expect(satisfiedAccessPolicy(resources[0], AccessPolicyInteraction.READ, empty)).toBeUndefined();
  });

  test('one compiled form per policy content: a caller resolved again keeps its compiled policy', () => {
    expect(compileAccessPolicy(ownConversations)).toBe(compileAccessPolicy(ownConversations));
    expect(compileAccessPolicy(structuredClone(ownConversations))).toBe(compileAccessPolicy(ownConversations));
    const narrower = { ...ownConversations, resource: ownConversations.resource?.slice(1) };
    expect(compileAccessPolicy(narrower)).not.toBe(compileAccessPolicy(ownConversations));
  });

  test('decisions about stored versions are the same as fresh ones, for every version', () => {
    const compiled = compileAccessPolicy(ownConversations);
    let version = 0;
    for (const resource of resources) {
      const stored = { ...resource, id: resource.id ?? 'r1', meta: { ...resource.meta, versionId: `v${version++}` } };
      for (const interaction of interactions) {
        const expected = satisfiedAccessPolicy(stored, interaction, ownConversations);
        // Asked twice: the second answer comes from what the first remembered.
        expect(compiled.satisfiedByStored(stored, interaction)).toEqual(expected);
        expect(compiled.satisfiedByStored(stored, interaction)).toEqual(expected);
      }
    }
  });

  test('a new version of the same resource is decided on its own content', () => {
    const compiled = compileAccessPolicy(ownConversations);
    const mine = { resourceType: 'Communication', id: 'c1', status: 'completed', sender: { reference: 'Practitioner/dr' }, meta: { versionId: 'a' } } as const;
    expect(compiled.satisfiedByStored(mine, AccessPolicyInteraction.CREATE)).toBeDefined();
    const movedAway = { ...mine, sender: { reference: 'Practitioner/other' }, meta: { versionId: 'b' } };
    expect(compiled.satisfiedByStored(movedAway, AccessPolicyInteraction.CREATE)).toBeUndefined();
    // Without a versionId nothing is remembered: the content decides every time.
    const unversioned = { ...movedAway, meta: {} };
    expect(compiled.satisfiedByStored(unversioned, AccessPolicyInteraction.CREATE)).toBeUndefined();
    expect(compiled.satisfiedByStored({ ...unversioned, sender: mine.sender }, AccessPolicyInteraction.CREATE)).toBeDefined();
  });
});
