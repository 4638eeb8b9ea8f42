/**
 * `find_patients`: a Patient search by name, birth date or identifier, as the caller (the caller's AccessPolicy
 * decides which patients are found). Each patient is given with the fields a client needs to tell them apart and
 * to name them to the chart tools: id, name, birth date, gender, identifiers.
 */
import { parseSearchRequest, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Patient } from '@medplum/fhirtypes';
import { CHART_DATA_NOTE } from '../chat/fhir-tools.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';

export const FIND_PATIENTS_TOOL = 'find_patients';

/** The tool's input: at least one of the three. */
export const FIND_PATIENTS_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', description: "Part of the patient's name, e.g. 'Smith' or 'Ann Smith'." },
    birthdate: { type: 'string', description: 'Birth date as YYYY-MM-DD (or a FHIR date search such as ge1980-01-01).' },
    identifier: { type: 'string', description: 'An identifier, as value or system|value, e.g. a medical record number.' },
  },
  additionalProperties: false,
} as const;

/** What a search found: the patients, the text for the client, the search as it ran (for the AuditEvent). */
export interface FoundPatients {
  readonly patients: readonly WithId<Patient>[];
  readonly text: string;
  readonly query: string;
}

/** Runs the search as the caller; a string says why the input was not searched. */
export async function findPatients(repo: FhirRepository, input: Record<string, unknown>, maxResults: number): Promise<FoundPatients | string> {
  const query: Record<string, string> = {};
  for (const field of ['name', 'birthdate', 'identifier'] as const) {
    const value = input[field];
    if (typeof value === 'string' && value.trim() !== '') {
      query[field] = value.trim().slice(0, 200);
    }
  }
  if (Object.keys(query).length === 0) {
    return 'Give at least one of name, birthdate or identifier.';
  }
  query._count = String(maxResults);
  let patients: WithId<Patient>[];
  try {
    patients = await repo.searchResources(parseSearchRequest<Patient>('Patient', query));
  } catch (error) {
    if (isOutcomeStatus(error, 403)) {
      return 'The requesting user is not permitted to search patients.';
    }
    if (isOutcomeStatus(error, 400)) {
      return 'The search was not accepted: birthdate must be a date such as 1958-03-14, optionally with a prefix such as ge.';
    }
    throw error;
  }
  const listed = patients.map((patient) => ({
    id: patient.id,
    name: patient.name?.map((name) => [name.given?.join(' '), name.family].filter(Boolean).join(' ')),
    birthDate: patient.birthDate,
    gender: patient.gender,
    identifier: patient.identifier?.map((identifier) => ({ system: identifier.system, value: identifier.value })),
  }));
  const text = JSON.stringify({ note: CHART_DATA_NOTE, count: listed.length, patients: listed }).replaceAll('<', '\\u003c').replaceAll('>', '\\u003e');
  return { patients, text, query: `Patient?${new URLSearchParams(query).toString()}` };
}
