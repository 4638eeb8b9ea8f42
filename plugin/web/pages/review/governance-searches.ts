/**
 * The AuditEvents of changes to the project's governance settings, newest first: fhirgate records one for each
 * change made through Medplum's settings route (plugin/governance/settings-change-audit.ts), whoever makes it.
 */
import { Operator, type SearchRequest } from '@medplum/core';

export const SETTINGS_CHANGES_SEARCH: SearchRequest = {
  resourceType: 'AuditEvent',
  filters: [{ code: 'subtype', operator: Operator.EQUALS, value: 'urn:fhirgate:audit|governance-settings-change' }],
  fields: ['recorded', 'agent', 'outcomeDesc'],
  sortRules: [{ code: 'date', descending: true }],
  count: 10,
};
