/**
 * `find_patients`: a Patient search by name, birth date or identifier, as the caller (the caller's AccessPolicy
 * decides which patients are found). Each patient is given with the fields a client needs to tell them apart and
 * to name them to the chart tools: id, name, birth date, gender, identifiers. The search runs page by page: each
 * page at most `maxResults` patients within the answer's size cap.
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
    page_token: { type: 'string', description: 'The next_page of an earlier answer, to get the next page of the same search.' },
  },
  additionalProperties: false,
} as const;

/** What a search found: the page's patients, whether more matched, the search as it ran (for the AuditEvent). */
export interface FoundPatients {
  readonly patients: readonly WithId<Patient>[];
  readonly moreMatched: boolean;
  readonly query: string;
}

/**
 * Runs the search as the caller, for the page of at most `count` patients from `offset` on; a string says why the
 * input was not searched.
 */
export async function findPatients(repo: FhirRepository, input: Record<string, unknown>, page: { readonly count: number; readonly offset: number }): Promise<FoundPatients | string> {
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
  // One patient more than the page gives: whether there is a next page is known without counting them all.
  query._count = String(page.count + 1);
  if (page.offset > 0) {
    query._offset = String(page.offset);
  }
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
  return { patients: patients.slice(0, page.count), moreMatched: patients.length > page.count, query: `Patient?${new URLSearchParams(query).toString()}` };
}

/** What the client is told of a patient found: the fields that tell patients apart (the id is the caller's to add). */
export function patientListing(patient: Patient): Record<string, unknown> {
  return {
    name: patient.name?.map((name) => [name.given?.join(' '), name.family].filter(Boolean).join(' ')),
    birthDate: patient.birthDate,
    gender: patient.gender,
    identifier: patient.identifier?.map((identifier) => ({ system: identifier.system, value: identifier.value })),
  };
}

/**
 * The listing of the patients found within `maxCharacters` (room kept for `reserve` more), and how many fitted:
 * only those are given, and disclosed.
 */
export function listedPatients(listings: readonly object[], maxCharacters: number, options: { readonly reserve: number; readonly moreMatched: boolean }): { readonly text: string; readonly fitted: number } {
  let length = quotedJson({ note: CHART_DATA_NOTE, count: listings.length, truncated: true, more: MORE_PATIENTS, patients: [] }).length + options.reserve;
  const included: object[] = [];
  for (const listing of listings) {
    const size = quotedJson(listing).length + 1;
    if (length + size > maxCharacters) {
      break;
    }
    length += size;
    included.push(listing);
  }
  const more = included.length < listings.length || options.moreMatched;
  return { text: quotedJson({ note: CHART_DATA_NOTE, count: included.length, ...(more ? { truncated: true, more: MORE_PATIENTS } : {}), patients: included }), fitted: included.length };
}

const MORE_PATIENTS = 'More patients matched: call again with the same arguments and page_token set to next_page for the next page, or narrow the search.';

/** JSON in which nothing written in a record can look like markup around it, as the chat's tools write it. */
export function quotedJson(value: unknown): string {
  return JSON.stringify(value).replaceAll('<', '\\u003c').replaceAll('>', '\\u003e');
}
