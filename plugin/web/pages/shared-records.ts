/**
 * Which records of the chart a reply about a patient was given (docs/api.md, "Which data did the model see for this
 * answer?"): the reply Communication's `about`, once each, in its order (the Patient first), each as the record's
 * type and id, so the app can link to it and read it as the signed-in user. Anything that is not a plain
 * `Type/id` reference of a resource is left out rather than linked.
 */
import type { Communication } from '@medplum/fhirtypes';

export interface SharedRecord {
  readonly resourceType: string;
  readonly id: string;
  /** `Type/id`. */
  readonly reference: string;
}

const REFERENCE = /^([A-Z][A-Za-z]{1,63})\/([A-Za-z0-9\-.]{1,64})$/;

/** The records the reply's `about` lists, in order, without repeats. */
export function sharedRecordsOf(reply: Pick<Communication, 'about'>): SharedRecord[] {
  const seen = new Set<string>();
  const records: SharedRecord[] = [];
  for (const reference of reply.about ?? []) {
    const match = REFERENCE.exec(reference.reference ?? '');
    if (!match || seen.has(match[0])) {
      continue;
    }
    seen.add(match[0]);
    records.push({ resourceType: match[1], id: match[2], reference: match[0] });
  }
  return records;
}

/** The app's page for a record (`/records/:resourceType/:id`). */
export function recordPath(record: Pick<SharedRecord, 'resourceType' | 'id'>): string {
  return `/records/${encodeURIComponent(record.resourceType)}/${encodeURIComponent(record.id)}`;
}

/** Whether `/records/:resourceType/:id`'s parts name a record the app may ask the server for. */
export function isRecordAddress(resourceType: string | undefined, id: string | undefined): boolean {
  return REFERENCE.test(`${resourceType ?? ''}/${id ?? ''}`);
}

const KIND: Readonly<Record<string, string>> = {
  Patient: 'Patient',
  Condition: 'Problem',
  MedicationRequest: 'Prescription',
  MedicationStatement: 'Medication',
  AllergyIntolerance: 'Allergy',
  Observation: 'Observation',
  Encounter: 'Encounter',
  Procedure: 'Procedure',
  Immunization: 'Immunization',
  DiagnosticReport: 'Report',
  DocumentReference: 'Document',
};

/** What a clinician calls a record of this type. */
export function recordKind(resourceType: string): string {
  return KIND[resourceType] ?? resourceType.replace(/([a-z])([A-Z])/g, '$1 $2');
}
