import { MemoryRepository } from '@medplum/fhir-router';
import type { Condition, Observation, Patient } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { buildPatientContext, patientContextOptionsFor, PATIENT_CONTEXT_TYPES } from './patient-context.ts';

describe('buildPatientContext', () => {
  let repo: MemoryRepository;
  let patient: Patient & { id: string };

  beforeAll(() => loadFhirDefinitions());
  beforeEach(async () => {
    repo = new MemoryRepository();
    patient = await repo.createResource<Patient>({ resourceType: 'Patient', name: [{ given: ['Ana'], family: 'Silva' }], gender: 'female', birthDate: '1970-01-02' });
    const subject = { reference: `Patient/${patient.id}` };
    await repo.createResource<Condition>({ resourceType: 'Condition', subject, code: { coding: [{ system: 'http://snomed.info/sct', code: '44054006', display: 'Diabetes mellitus type 2' }] }, clinicalStatus: { coding: [{ code: 'active' }] } });
    for (let day = 1; day <= 30; day++) {
      await repo.createResource<Observation>({ resourceType: 'Observation', status: 'final', subject, code: { text: 'Glucose' }, effectiveDateTime: `2026-10-${String(day).padStart(2, '0')}`, valueQuantity: { value: 100 + day, unit: 'mg/dL' } });
    }
  });

  test('shares only the configured types, the newest records of each, and names every record it used', async () => {
    const context = await buildPatientContext(repo, patient, { resourceTypes: ['Observation'], maxPerType: 3, maxCharacters: 5000 });
    expect(context.text.split('\n')).toEqual([
      "Patient context (from the FHIR record, read with the requesting user's permissions): Ana Silva, female, born 1970-01-02",
      'Recent vital signs and labs:',
      '- 2026-10-30 Glucose 130 mg/dL',
      '- 2026-10-29 Glucose 129 mg/dL',
      '- 2026-10-28 Glucose 128 mg/dL',
    ]);
    expect(context.shared).toHaveLength(4);
    expect(context.shared[0]).toEqual({ reference: `Patient/${patient.id}` });
  });

  test('a coded problem is named by its display; the text is capped, saying so', async () => {
    const context = await buildPatientContext(repo, patient, { resourceTypes: [...PATIENT_CONTEXT_TYPES], maxPerType: 30, maxCharacters: 400 });
    expect(context.text).toContain('- Diabetes mellitus type 2');
    expect(context.text.length).toBeLessThanOrEqual(400 + '\n(more records not shown)'.length);
    expect(context.text.endsWith('(more records not shown)')).toBe(true);
    // Only records whose line is in the text count as shared.
    const listed = context.text.split('\n').filter((line) => line.startsWith('- ')).length;
    expect(context.shared).toHaveLength(1 + listed);
  });

  test("a project's setting narrows the server's types, never widens them", () => {
    const server = { enabled: true, resourceTypes: ['Condition', 'Observation'] as const, maxPerType: 10, maxCharacters: 8000 };
    const project = (valueString?: string) => ({ resourceType: 'Project' as const, setting: valueString === undefined ? [] : [{ name: 'AI_PATIENT_CONTEXT', valueString }] });
    expect(patientContextOptionsFor(project(), server)).toBe(server);
    expect(patientContextOptionsFor(project(' Observation '), server).resourceTypes).toEqual(['Observation']);
    expect(patientContextOptionsFor(project('OFF'), server).enabled).toBe(false);
    expect(() => patientContextOptionsFor(project('Condition, MedicationRequest'), server)).toThrow(/AI_PATIENT_CONTEXT names 'MedicationRequest'/);
  });
});
