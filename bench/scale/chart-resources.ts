/**
 * The clinical records of the scale benchmark's store: a patient's chart (vital signs and labs, problems,
 * medications, allergies) and device readings, shaped as a clinic's integration and its monitors write them, with
 * the server-owned meta the writing repository sets (project, author, the patient's compartment).
 */
import { randomUUID } from 'node:crypto';
import type { AllergyIntolerance, Condition, MedicationRequest, MedicationStatement, Observation, Patient, Reference, Resource } from '@medplum/fhirtypes';

/** Who wrote the records and where they live. */
export interface ChartAuthors {
  readonly projectId: string;
  /** `Practitioner/<id>`: performer, recorder and requester of what a clinician writes. */
  readonly practitioner: string;
  /** `ClientApplication/<id>`: `meta.author` of what the integration writes. */
  readonly integration: string;
}

/** A resource with its id, as the bulk load takes it. */
export type Stored<T extends Resource> = T & { id: string; meta: NonNullable<T['meta']> };

const VITALS = [
  { code: '8867-4', display: 'Heart rate', unit: 'beats/minute', base: 72, spread: 20, category: 'vital-signs' },
  { code: '8480-6', display: 'Systolic blood pressure', unit: 'mm[Hg]', base: 128, spread: 25, category: 'vital-signs' },
  { code: '8310-5', display: 'Body temperature', unit: 'Cel', base: 36.8, spread: 1.2, category: 'vital-signs' },
  { code: '59408-5', display: 'Oxygen saturation', unit: '%', base: 96, spread: 4, category: 'vital-signs' },
  { code: '29463-7', display: 'Body weight', unit: 'kg', base: 74, spread: 6, category: 'vital-signs' },
  { code: '2339-0', display: 'Glucose', unit: 'mg/dL', base: 105, spread: 40, category: 'laboratory' },
  { code: '4548-4', display: 'Hemoglobin A1c', unit: '%', base: 6.4, spread: 1.5, category: 'laboratory' },
] as const;
const PROBLEMS = ['Essential hypertension', 'Type 2 diabetes mellitus', 'Hyperlipidaemia', 'Chronic kidney disease stage 3', 'Osteoarthritis of knee', 'Asthma'];
const MEDICATIONS = ['Lisinopril 10 mg', 'Metformin 500 mg', 'Atorvastatin 20 mg', 'Amlodipine 5 mg', 'Salbutamol inhaler', 'Paracetamol 1 g'];
const ALLERGENS = ['Penicillin', 'Peanut', 'Latex', 'Sulfonamides'];
const HOUR_MILLIS = 3600 * 1000;

/** The meta the writing repository sets: project, author, and the compartment of the patient the record is about. */
function meta(authors: ChartAuthors, author: string, patient: string | undefined): Resource['meta'] {
  const compartment: Reference[] = [{ reference: `Project/${authors.projectId}` }];
  if (patient) {
    compartment.push({ reference: patient });
  }
  return { project: authors.projectId, author: { reference: author }, compartment };
}

/**
 * The `index`-th reading of a chart, `index` hours before `newestMillis`: a vital sign or a lab by the practitioner,
 * or a monitor's reading (`device`) filed into the chart.
 */
export function chartObservation(authors: ChartAuthors, patient: string, index: number, newestMillis: number, device?: string): Stored<Observation> {
  const vital = VITALS[index % VITALS.length];
  const when = new Date(newestMillis - index * HOUR_MILLIS).toISOString();
  return {
    resourceType: 'Observation',
    id: randomUUID(),
    meta: meta(authors, device ?? authors.integration, patient) as Stored<Observation>['meta'],
    status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: vital.category }] }],
    code: { coding: [{ system: 'http://loinc.org', code: vital.code, display: vital.display }], text: vital.display },
    subject: { reference: patient },
    effectiveDateTime: when,
    issued: when,
    ...(device ? { device: { reference: device } } : { performer: [{ reference: authors.practitioner }] }),
    valueQuantity: { value: Math.round((vital.base + ((index * 7919) % 100) / 100 * vital.spread - vital.spread / 2) * 10) / 10, unit: vital.unit, system: 'http://unitsofmeasure.org', code: vital.unit },
  };
}

/** A monitor's reading about no patient (the monitor itself), as a device posts it through `/graphql`. */
export function deviceObservation(authors: ChartAuthors, device: string, index: number, newestMillis: number): Stored<Observation> {
  const when = new Date(newestMillis - index * 60_000).toISOString();
  return {
    resourceType: 'Observation',
    id: randomUUID(),
    meta: meta(authors, device, undefined) as Stored<Observation>['meta'],
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    effectiveDateTime: when,
    device: { reference: device },
    valueQuantity: { value: 60 + (index % 40), unit: 'beats/minute' },
  };
}

/** A patient of the clinic. */
export function patient(authors: ChartAuthors, index: number): Stored<Patient> {
  const id = randomUUID();
  return {
    resourceType: 'Patient',
    id,
    meta: meta(authors, authors.integration, `Patient/${id}`) as Stored<Patient>['meta'],
    name: [{ given: [`Synthetic ${index}`], family: 'Patient' }],
    gender: index % 2 === 0 ? 'female' : 'male',
    birthDate: `${1940 + (index % 60)}-0${1 + (index % 9)}-1${index % 10}`,
  };
}

/** The `index`-th problem of a patient: active, or resolved for every third. */
export function condition(authors: ChartAuthors, patientReference: string, index: number, newestMillis: number): Stored<Condition> {
  const recorded = new Date(newestMillis - (index + 1) * 30 * 24 * HOUR_MILLIS).toISOString();
  return {
    resourceType: 'Condition',
    id: randomUUID(),
    meta: meta(authors, authors.integration, patientReference) as Stored<Condition>['meta'],
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: index % 3 === 2 ? 'resolved' : 'active' }] },
    code: { text: PROBLEMS[index % PROBLEMS.length] },
    subject: { reference: patientReference },
    recordedDate: recorded,
    onsetDateTime: recorded,
    recorder: { reference: authors.practitioner },
  };
}

/** The `index`-th prescription of a patient: active, or stopped for every fourth. */
export function medicationRequest(authors: ChartAuthors, patientReference: string, index: number, newestMillis: number): Stored<MedicationRequest> {
  return {
    resourceType: 'MedicationRequest',
    id: randomUUID(),
    meta: meta(authors, authors.integration, patientReference) as Stored<MedicationRequest>['meta'],
    status: index % 4 === 3 ? 'stopped' : 'active',
    intent: 'order',
    medicationCodeableConcept: { text: MEDICATIONS[index % MEDICATIONS.length] },
    subject: { reference: patientReference },
    authoredOn: new Date(newestMillis - (index + 1) * 14 * 24 * HOUR_MILLIS).toISOString(),
    requester: { reference: authors.practitioner },
    dosageInstruction: [{ text: 'once daily' }],
  };
}

/** A medication the patient reports taking. */
export function medicationStatement(authors: ChartAuthors, patientReference: string, index: number, newestMillis: number): Stored<MedicationStatement> {
  return {
    resourceType: 'MedicationStatement',
    id: randomUUID(),
    meta: meta(authors, authors.integration, patientReference) as Stored<MedicationStatement>['meta'],
    status: 'active',
    medicationCodeableConcept: { text: MEDICATIONS[(index + 3) % MEDICATIONS.length] },
    subject: { reference: patientReference },
    effectiveDateTime: new Date(newestMillis - (index + 1) * 60 * 24 * HOUR_MILLIS).toISOString(),
  };
}

/** An allergy of the patient. */
export function allergy(authors: ChartAuthors, patientReference: string, index: number): Stored<AllergyIntolerance> {
  return {
    resourceType: 'AllergyIntolerance',
    id: randomUUID(),
    meta: meta(authors, authors.integration, patientReference) as Stored<AllergyIntolerance>['meta'],
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] },
    code: { text: ALLERGENS[index % ALLERGENS.length] },
    patient: { reference: patientReference },
    criticality: index % 2 === 0 ? 'high' : 'low',
    recorder: { reference: authors.practitioner },
  };
}
