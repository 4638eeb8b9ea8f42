/**
 * The AuditEvent of a disclosure to the model: the patient's records fhirgate read with the caller's permissions
 * and sent to the LLM for one reply, following the IHE Basic Audit Log Patterns' patient-privacy "Query": the
 * caller as the requesting agent, the AI agent's Device as the recipient, the patient as the patient entity, each
 * record shared as a domain resource, and the reply it was sent for. Written before the provider is called.
 */
import type { AuditEvent, Device, Reference } from '@medplum/fhirtypes';

const OBJECT_ROLE = 'http://terminology.hl7.org/CodeSystem/object-role';

/** One disclosure: who asked, what was sent, to which reply. */
export interface Disclosure {
  readonly caller: NonNullable<AuditEvent['agent'][number]['who']>;
  readonly agent: Reference<Device>;
  /** The records shared, the Patient first (see patient-context.ts). */
  readonly shared: readonly Reference[];
  readonly replyId: string;
}

/** The AuditEvent recording `disclosure`. */
export function buildDisclosureEvent(disclosure: Disclosure): AuditEvent {
  const [patient, ...records] = disclosure.shared;
  return {
    resourceType: 'AuditEvent',
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest', display: 'RESTful Operation' },
    subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'search-type', display: 'search type' }],
    action: 'E',
    recorded: new Date().toISOString(),
    outcome: '0',
    outcomeDesc: `Patient context sent to the AI model for reply Communication/${disclosure.replyId}: ${disclosure.shared.length} records`,
    purposeOfEvent: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActReason', code: 'TREAT', display: 'treatment' }] }],
    agent: [
      { who: disclosure.caller, requestor: true },
      { who: disclosure.agent, requestor: false, type: { text: 'recipient: the AI model, through fhirgate' } },
    ],
    source: { observer: disclosure.agent },
    entity: [
      { what: patient, role: { system: OBJECT_ROLE, code: '1', display: 'Patient' } },
      ...records.map((what) => ({ what, role: { system: OBJECT_ROLE, code: '4', display: 'Domain Resource' } })),
      { what: { reference: `Communication/${disclosure.replyId}` }, role: { system: OBJECT_ROLE, code: '3', display: 'Report' } },
    ],
  };
}
