/**
 * The review console's lists as FHIR searches, run on the server (paged, sorted, filtered there) by
 * `@medplum/react`'s `SearchControl`, each filter a search parameter the server indexes (docs/app.md):
 * - conversations (their root records, category `ai-conversation`) by user (`sender`), patient (`subject`) and date
 *   (`sent`); a filter on the outcome or the model lists replies instead (category `ai-response`), since a reply is what
 *   records them: its `status` (`completed`, `stopped`, `not-done`) and its model (the code of its `medium` in `urn:fhirgate:ai-model`);
 * - disclosures of patient data to a model or an MCP client (AuditEvents of type `rest` with a patient entity:
 *   plugin/chat/disclosure-audit.ts) by patient (`entity`), user (`agent`), date and where the records went: a
 *   chat's disclosure names the reply it was sent for (an entity of role `3`), an MCP client's names none (there is
 *   no reply in fhirgate), so `entity-role=3` selects the chat's and `entity-role:not=3` the MCP clients';
 * - device sign-ins (AuditEvents of the device token exchange, DICOM `110114`: plugin/devices/device-audit.ts) by
 *   outcome and date.
 */
import { Operator, type Filter, type SearchRequest } from '@medplum/core';
import { CATEGORY, MODEL_MEDIUM_SYSTEM } from '../../../chat/fhir-vocabulary.ts';

/** How a reply ended, as the console names it, and the reply's `status`. */
export const OUTCOMES = { completed: 'completed', stopped: 'stopped', failed: 'not-done' } as const;
export type Outcome = keyof typeof OUTCOMES;

/** A period of whole UTC days, `YYYY-MM-DD`, both included; either may be open. */
export interface Period {
  readonly from?: string;
  readonly to?: string;
}

/** What the reviewer filters conversations by; every field optional. */
export interface ConversationFilters extends Period {
  /** The user who started it, a reference (`Practitioner/<id>`). */
  readonly user?: string;
  /** The patient it is about: an id, or `Patient/<id>`. */
  readonly patient?: string;
  readonly outcome?: Outcome;
  /** `provider/model`. */
  readonly model?: string;
}

/** Where a disclosure sent the records: to the chat's AI model, or to an MCP client. */
export type DisclosureRecipientKind = 'model' | 'mcp';

/** What the reviewer filters disclosures by. */
export interface DisclosureFilters extends Period {
  readonly patient?: string;
  readonly user?: string;
  readonly recipient?: DisclosureRecipientKind;
}

/** What the reviewer filters device sign-ins by. */
export interface DeviceFilters extends Period {
  readonly outcome?: 'issued' | 'refused';
}

const PAGE = 20;
/**
 * The count a list shows: `SearchControl` asks for an exact one unless told; an estimate is what a Medplum server
 * can give cheaply for a large project (it counts exactly when the estimate is small; the standalone host always does).
 */
const TOTAL = 'estimate';
const REST = 'http://terminology.hl7.org/CodeSystem/audit-event-type|rest';
/** The role of the entity a chat's disclosure names its reply by (object-role `3`, Report). */
const REPLY_ROLE = '3';
const USER_AUTHENTICATION = 'http://dicom.nema.org/resources/ontology/DCM|110114';

/** Whether the filters ask about replies (outcome, model) rather than conversations. */
export function listsReplies(filters: ConversationFilters): boolean {
  return Boolean(filters.outcome || filters.model?.trim());
}

/** Conversation roots across the project, newest first; or, filtered by outcome or model, the replies. */
export function conversationSearch(filters: ConversationFilters = {}): SearchRequest {
  const patient = patientReference(filters.patient);
  const user = filters.user?.trim();
  if (!listsReplies(filters)) {
    return {
      resourceType: 'Communication',
      filters: [
        equals('category', CATEGORY.conversation.code),
        ...(user ? [equals('sender', user)] : []),
        ...(patient ? [equals('subject', patient)] : []),
        ...periodFilters('sent', filters),
      ],
      fields: ['sent', 'sender', 'subject', 'status'],
      sortRules: [{ code: 'sent', descending: true }],
      count: PAGE,
    total: TOTAL,
    };
  }
  const model = filters.model?.trim();
  return {
    resourceType: 'Communication',
    filters: [
      equals('category', CATEGORY.response.code),
      ...(filters.outcome ? [equals('status', OUTCOMES[filters.outcome])] : []),
      ...(model ? [equals('medium', `${MODEL_MEDIUM_SYSTEM}|${model}`)] : []),
      // The AI agent answers the user: a reply's recipient is the user who asked.
      ...(user ? [equals('recipient', user)] : []),
      ...(patient ? [equals('subject', patient)] : []),
      ...periodFilters('sent', filters),
    ],
    fields: ['sent', 'recipient', 'subject', 'medium', 'status'],
    sortRules: [{ code: 'sent', descending: true }],
    count: PAGE,
    total: TOTAL,
  };
}

/**
 * Disclosures of patient records to a model or an MCP client, newest first. The list's columns are the time and the
 * description; who asked and where the records went are columns the disclosures panel computes from each event.
 */
export function disclosureSearch(filters: DisclosureFilters = {}): SearchRequest {
  const patient = patientReference(filters.patient);
  const user = filters.user?.trim();
  return {
    resourceType: 'AuditEvent',
    filters: [
      equals('type', REST),
      equals('entity-role', '1'),
      ...(patient ? [equals('entity', patient)] : []),
      ...(user ? [equals('agent', user)] : []),
      ...recipientFilters(filters.recipient),
      ...periodFilters('date', filters),
    ],
    fields: ['recorded', 'outcomeDesc'],
    sortRules: [{ code: 'date', descending: true }],
    count: PAGE,
    total: TOTAL,
  };
}

/** Device token exchanges: tokens issued, refusals (a wrong key, an unknown device, a lockout), newest first. */
export function deviceSearch(filters: DeviceFilters = {}): SearchRequest {
  return {
    resourceType: 'AuditEvent',
    filters: [
      equals('type', USER_AUTHENTICATION),
      ...(filters.outcome ? [equals('outcome', filters.outcome === 'issued' ? '0' : '4')] : []),
      ...periodFilters('date', filters),
    ],
    fields: ['recorded', 'agent', 'outcome', 'outcomeDesc'],
    sortRules: [{ code: 'date', descending: true }],
    count: PAGE,
    total: TOTAL,
  };
}

/** The chat's disclosures name the reply they were sent for; an MCP client's name none. */
function recipientFilters(recipient: DisclosureRecipientKind | undefined): Filter[] {
  if (recipient === 'model') {
    return [equals('entity-role', REPLY_ROLE)];
  }
  if (recipient === 'mcp') {
    return [{ code: 'entity-role', operator: Operator.NOT, value: REPLY_ROLE }];
  }
  return [];
}

/** `Patient/<id>` of what the reviewer typed (an id, or a reference); undefined when empty. */
export function patientReference(typed: string | undefined): string | undefined {
  const value = typed?.trim();
  if (!value) {
    return undefined;
  }
  return value.startsWith('Patient/') ? value : `Patient/${value}`;
}

/** The filters of a period of whole UTC days on a date parameter: from its first instant, before the day after it. */
export function periodFilters(code: string, period: Period): Filter[] {
  const filters: Filter[] = [];
  if (period.from) {
    filters.push({ code, operator: Operator.GREATER_THAN_OR_EQUALS, value: `${period.from}T00:00:00.000Z` });
  }
  if (period.to) {
    filters.push({ code, operator: Operator.LESS_THAN, value: `${nextDay(period.to)}T00:00:00.000Z` });
  }
  return filters;
}

function nextDay(day: string): string {
  const date = new Date(`${day}T00:00:00.000Z`);
  date.setUTCDate(date.getUTCDate() + 1);
  return date.toISOString().slice(0, 10);
}

function equals(code: string, value: string): Filter {
  return { code, operator: Operator.EQUALS, value };
}
