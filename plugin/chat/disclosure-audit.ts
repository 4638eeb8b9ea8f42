/**
 * The AuditEvent of a disclosure to the model: records of a patient that fhirgate read with the caller's
 * permissions and sent to the LLM for one reply, following the IHE Basic Audit Log Patterns' patient-privacy
 * events: the caller as the requesting agent, the AI agent's Device as the recipient, the patient as the patient
 * entity, each record shared as a domain resource, and the reply it was sent for. One event per disclosure: the
 * patient summary ("Query"), the stored records about the patient a request took in (a Responses
 * `item_reference` to an earlier reply: a "Read"), and each FHIR tool call that returned records (a search is a
 * "Query" with its query, a read is a "Read"). Each is written before the model is given the records.
 *
 * A disclosure to a model not cleared for patient data, de-identified (governance/), says so: the patient's and each
 * record's entity carry the security label `PSEUDED` (HL7 v3 ObservationValue, pseudonymized: identifiers replaced by
 * pseudonyms that fhirgate, and only it, maps back), and the description names the form.
 */
import type { AuditEvent, AuditEventEntity, Coding, Device, Reference } from '@medplum/fhirtypes';

const OBJECT_ROLE = 'http://terminology.hl7.org/CodeSystem/object-role';
const ENTITY_TYPE = 'http://terminology.hl7.org/CodeSystem/audit-entity-type';
const RESTFUL_INTERACTION = 'http://hl7.org/fhir/restful-interaction';
/** The security label of data sent de-identified: pseudonymised (re-identifiable by fhirgate alone). */
export const PSEUDONYMIZED: Coding = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'PSEUDED', display: 'pseudonymized' };

/** How the records were read. */
export type DisclosureAccess =
  /** The patient summary sent with the prompt. */
  | { readonly kind: 'summary' }
  /** A FHIR tool's search, with the search as it ran (`Type?patient=...&...`). */
  | { readonly kind: 'query'; readonly query: string; readonly toolCallId: string }
  /** A FHIR tool's read of one record. */
  | { readonly kind: 'read'; readonly toolCallId: string }
  /** Stored records the request named (Responses `item_reference`s), read with the caller's permissions, sent with the prompt. */
  | { readonly kind: 'input' };

/** One disclosure: who asked, what was sent, to which reply. */
export interface Disclosure {
  readonly caller: NonNullable<AuditEvent['agent'][number]['who']>;
  readonly agent: Reference<Device>;
  readonly patient: Reference;
  /** The records shared (the Patient itself may be one of them). */
  readonly shared: readonly Reference[];
  /** The reply the records were sent for; absent where there is none (an MCP client's tool call). */
  readonly replyId?: string;
  /**
   * The recipient when it is not the AI model behind `agent`: an MCP client, as it named itself (`agent` is then
   * fhirgate's MCP server, the observer).
   */
  readonly recipient?: { readonly who: Reference<Device>; readonly text: string; readonly name?: string };
  readonly access: DisclosureAccess;
  /** True when the records went to the model de-identified (names, identifiers, contacts, addresses replaced; dates shifted). */
  readonly deIdentified?: boolean;
}

/** The AuditEvent recording `disclosure`. */
export function buildDisclosureEvent(disclosure: Disclosure): AuditEvent {
  const { access } = disclosure;
  const records = disclosure.shared.filter((record) => record.reference !== disclosure.patient.reference);
  const label = disclosure.deIdentified ? { securityLabel: [PSEUDONYMIZED] } : {};
  return {
    resourceType: 'AuditEvent',
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest', display: 'RESTful Operation' },
    subtype: [isRead(access) ? { system: RESTFUL_INTERACTION, code: 'read', display: 'read' } : { system: RESTFUL_INTERACTION, code: 'search-type', display: 'search type' }],
    action: isRead(access) ? 'R' : 'E',
    recorded: new Date().toISOString(),
    outcome: '0',
    outcomeDesc: describe(disclosure),
    purposeOfEvent: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActReason', code: 'TREAT', display: 'treatment' }] }],
    agent: [
      { who: disclosure.caller, requestor: true },
      disclosure.recipient
        ? { who: disclosure.recipient.who, name: disclosure.recipient.name, requestor: false, type: { text: `recipient: ${disclosure.recipient.text}` } }
        : { who: disclosure.agent, requestor: false, type: { text: 'recipient: the AI model, through fhirgate' } },
    ],
    source: { observer: disclosure.agent },
    entity: [
      { what: disclosure.patient, role: { system: OBJECT_ROLE, code: '1', display: 'Patient' }, ...label },
      ...records.map((what) => ({ what, role: { system: OBJECT_ROLE, code: '4', display: 'Domain Resource' }, ...label })),
      ...(access.kind === 'query' ? [queryEntity(access.query)] : []),
      ...(disclosure.replyId ? [{ what: { reference: `Communication/${disclosure.replyId}` }, role: { system: OBJECT_ROLE, code: '3', display: 'Report' } }] : []),
    ],
  };
}

function describe(disclosure: Disclosure): string {
  const { access } = disclosure;
  const form = disclosure.deIdentified ? ', de-identified (names, identifiers, contact details and addresses replaced by pseudonyms, dates shifted)' : '';
  const count = `${disclosure.shared.length} record${disclosure.shared.length === 1 ? '' : 's'}${form}`;
  if (disclosure.replyId === undefined && access.kind === 'summary') {
    return `Patient summary answered for ${disclosure.recipient?.text ?? 'a client'}: ${count}`;
  }
  if (disclosure.replyId === undefined) {
    const kind = access.kind === 'read' ? 'read' : 'search';
    return `FHIR tool ${access.kind === 'query' || access.kind === 'read' ? `${access.toolCallId} ` : ''}(${kind}) answered for ${disclosure.recipient?.text ?? 'a client'}: ${count}`;
  }
  const reply = `reply Communication/${disclosure.replyId}`;
  if (access.kind === 'summary') {
    return `Patient context sent to the AI model for ${reply}: ${count}`;
  }
  if (access.kind === 'input') {
    return `Records about the patient named by the request (item_reference) sent to the AI model for ${reply}: ${count}`;
  }
  return `FHIR tool call ${access.toolCallId} (${access.kind === 'read' ? 'read' : 'search'}) answered for the AI model for ${reply}: ${count}`;
}

/** A read of named records (a tool's read, the request's referenced records), not a search. */
function isRead(access: DisclosureAccess): boolean {
  return access.kind === 'read' || access.kind === 'input';
}

/** BALP's query entity: the search as it ran, base64 encoded. */
function queryEntity(query: string): AuditEventEntity {
  return {
    type: { system: ENTITY_TYPE, code: '2', display: 'System Object' },
    role: { system: OBJECT_ROLE, code: '24', display: 'Query' },
    query: Buffer.from(query, 'utf8').toString('base64'),
  };
}
