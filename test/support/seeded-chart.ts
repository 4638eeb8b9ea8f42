/**
 * A chart for the demo patient `patient-in-care-team-1` of a seeded project, written with system rights: an active
 * problem, a prescription, an allergy, two vital signs / labs, a self-reported medication that the demo
 * practitioner's AccessPolicy does not grant (it must never reach a model), and another patient's problem.
 */
import type { FhirRepository } from '@medplum/fhir-router';
import type { AllergyIntolerance, Condition, MedicationRequest, MedicationStatement, Observation } from '@medplum/fhirtypes';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';

export interface SeededChart {
  readonly condition: Condition & { id: string };
  readonly medication: MedicationRequest & { id: string };
  readonly allergy: AllergyIntolerance & { id: string };
  readonly pulse: Observation & { id: string };
  readonly hba1c: Observation & { id: string };
  /** Not granted by the practitioner's AccessPolicy. */
  readonly statement: MedicationStatement & { id: string };
  /** Another patient's (`patient-in-care-team-2`). */
  readonly elsewhere: Condition & { id: string };
}

const ACTIVE_CONDITION = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] };

/** Writes the chart; `system` is the project's system repository. */
export async function seedChart(system: FhirRepository, project: SeededProject): Promise<SeededChart> {
  const patient = { reference: `Patient/${project.ids['patient-in-care-team-1']}` };
  return {
    condition: await system.createResource<Condition>({ resourceType: 'Condition', subject: patient, code: { text: 'Essential hypertension' }, clinicalStatus: ACTIVE_CONDITION, onsetDateTime: '2021-03-04' }),
    medication: await system.createResource<MedicationRequest>({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', subject: patient, medicationCodeableConcept: { text: 'Lisinopril 10 mg tablet' }, dosageInstruction: [{ text: 'one daily' }], authoredOn: '2021-03-05' }),
    allergy: await system.createResource<AllergyIntolerance>({ resourceType: 'AllergyIntolerance', patient, clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] }, code: { text: 'Penicillin' }, criticality: 'high' }),
    pulse: await system.createResource<Observation>({ resourceType: 'Observation', status: 'final', subject: patient, code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }], text: 'Heart rate' }, effectiveDateTime: '2026-11-01T09:00:00Z', valueQuantity: { value: 72, unit: '/min' } }),
    hba1c: await system.createResource<Observation>({ resourceType: 'Observation', status: 'final', subject: patient, code: { coding: [{ system: 'http://loinc.org', code: '4548-4', display: 'HbA1c' }], text: 'HbA1c' }, effectiveDateTime: '2026-10-15T09:00:00Z', valueQuantity: { value: 6.1, unit: '%' } }),
    statement: await system.createResource<MedicationStatement>({ resourceType: 'MedicationStatement', status: 'active', subject: patient, medicationCodeableConcept: { text: 'St John’s wort (self-reported)' } }),
    elsewhere: await system.createResource<Condition>({ resourceType: 'Condition', subject: { reference: `Patient/${project.ids['patient-in-care-team-2']}` }, code: { text: 'Asthma' }, clinicalStatus: ACTIVE_CONDITION }),
  };
}
