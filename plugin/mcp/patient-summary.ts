/**
 * A patient's summary for MCP clients: the chart summary the chat sends with a turn about a patient
 * (chat/patient-context.ts: demographics, active problems, medications, allergies, recent vital signs and labs,
 * fenced and quoted as data), read with the caller's repository under the project's sharing. Given as the tool
 * {@link SUMMARY_TOOL} and as the resource template {@link SUMMARY_TEMPLATE}, read with `resources/read`.
 */
import type { Reference } from '@medplum/fhirtypes';
import type { FhirRepository } from '@medplum/fhir-router';
import { MCP_SUMMARY_TOOL } from '../chat/fhir-vocabulary.ts';
import { buildPatientContext, type PatientContextOptions } from '../chat/patient-context.ts';
import type { NamedPatient } from './mcp-patients.ts';

/** The summary tool's name. */
export const SUMMARY_TOOL = MCP_SUMMARY_TOOL;
/** The summary's resource template; `{id}` is what the client names the patient by (`patient_id`). */
export const SUMMARY_TEMPLATE = 'fhirgate://Patient/{id}/summary';

/** The summary of a patient as the client gets it, and the records it holds. */
export async function patientSummary(repo: FhirRepository, named: NamedPatient, options: PatientContextOptions): Promise<{ readonly text: string; readonly shared: readonly Reference[] }> {
  const context = await buildPatientContext(repo, named.patient, options);
  return { text: named.form.text(context.text), shared: context.shared };
}

/** The summary's URI for a patient named `patientId`. */
export function summaryUri(patientId: string): string {
  return SUMMARY_TEMPLATE.replace('{id}', encodeURIComponent(patientId));
}
