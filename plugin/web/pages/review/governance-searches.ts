/**
 * The AuditEvents of changes to the project's governance settings, newest first: fhirgate records one for each
 * change made through Medplum's settings route (plugin/governance/settings-change-audit.ts), whoever makes it.
 */
import { Operator, type SearchRequest } from '@medplum/core';

/** The subtype fhirgate marks these AuditEvents with. */
export const SETTINGS_CHANGE_SUBTYPE = { system: 'urn:fhirgate:audit', code: 'governance-settings-change' } as const;

/** The changes, newest first. */
export const SETTINGS_CHANGES_SEARCH: SearchRequest = {
  resourceType: 'AuditEvent',
  filters: [{ code: 'subtype', operator: Operator.EQUALS, value: `${SETTINGS_CHANGE_SUBTYPE.system}|${SETTINGS_CHANGE_SUBTYPE.code}` }],
  fields: ['recorded', 'agent', 'outcomeDesc'],
  sortRules: [{ code: 'date', descending: true }],
  count: 10,
};
