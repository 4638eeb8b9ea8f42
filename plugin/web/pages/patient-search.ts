/**
 * Searching the patients the signed-in user may read, by name, birth date or identifier: what a clinician types
 * becomes a few FHIR searches of `Patient` run by the server as the user (so their AccessPolicy decides what is
 * found), at most {@link PATIENT_MATCHES} each, their results merged once each.
 */
import type { MedplumClient } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';

/** How many patients each search returns. */
export const PATIENT_MATCHES = 10;

const DATE = /^\d{4}(-\d{2}(-\d{2})?)?$/;
const DAY_FIRST = /^(\d{1,2})[./](\d{1,2})[./](\d{4})$/;

/**
 * The searches for what was typed: a date (`1958-03-14`, `1958`, or day first, `14.03.1958`) searches birth
 * dates; a word searches names; a single token with a digit in it searches identifiers too.
 */
export function patientSearches(input: string): Record<string, string>[] {
  const text = input.trim();
  if (!text) {
    return [];
  }
  const dayFirst = DAY_FIRST.exec(text);
  if (DATE.test(text) || dayFirst) {
    const date = dayFirst ? `${dayFirst[3]}-${dayFirst[2].padStart(2, '0')}-${dayFirst[1].padStart(2, '0')}` : text;
    return [{ birthdate: date, _count: String(PATIENT_MATCHES) }];
  }
  const searches: Record<string, string>[] = [{ name: text, _count: String(PATIENT_MATCHES) }];
  if (/\d/.test(text) && !/\s/.test(text)) {
    searches.push({ identifier: text, _count: String(PATIENT_MATCHES) });
  }
  return searches;
}

/** Runs the searches as the signed-in user and merges what they find, once each. */
export async function searchPatients(medplum: MedplumClient, input: string, signal?: AbortSignal): Promise<Patient[]> {
  const results = await Promise.all(patientSearches(input).map((query) => medplum.searchResources('Patient', query, { signal })));
  const found = new Map<string, Patient>();
  for (const patient of results.flat()) {
    if (patient.id && !found.has(patient.id)) {
      found.set(patient.id, patient);
    }
  }
  return [...found.values()];
}
