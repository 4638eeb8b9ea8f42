/**
 * The review console's lists as FHIR searches, run on the server (paged, sorted, filtered there) by
 * `@medplum/react`'s `SearchControl`: the project's conversations (their root records, category `ai-conversation`)
 * and the AuditEvents of disclosures of patient data to a model (type `rest`, purpose treatment, a patient entity:
 * plugin/chat/disclosure-audit.ts), newest first.
 */
import { Operator, type SearchRequest } from '@medplum/core';
import { CATEGORY } from '../../../chat/fhir-vocabulary.ts';

/** Conversation roots across the project, newest first. */
export const CONVERSATIONS_SEARCH: SearchRequest = {
  resourceType: 'Communication',
  filters: [{ code: 'category', operator: Operator.EQUALS, value: CATEGORY.conversation.code }],
  fields: ['sent', 'sender', 'subject', 'status'],
  sortRules: [{ code: 'sent', descending: true }],
  count: 20,
};

/** Disclosures of patient records to a model, newest first. */
export const DISCLOSURES_SEARCH: SearchRequest = {
  resourceType: 'AuditEvent',
  filters: [
    { code: 'type', operator: Operator.EQUALS, value: 'http://terminology.hl7.org/CodeSystem/audit-event-type|rest' },
    { code: 'entity-role', operator: Operator.EQUALS, value: '1' },
  ],
  fields: ['recorded', 'agent', 'outcomeDesc'],
  sortRules: [{ code: 'date', descending: true }],
  count: 20,
};
