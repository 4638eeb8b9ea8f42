import { formatSearchQuery, type SearchRequest } from '@medplum/core';
import { conversationSearch, deviceSearch, disclosureSearch, listsReplies } from './review-searches.ts';

/** The search's query parameters, in any order (`formatSearchQuery` sorts them). */
const parameters = (search: SearchRequest): string[] => decodeURIComponent(formatSearchQuery({ ...search, fields: undefined, total: undefined })).slice(1).split('&').sort();
const expected = (query: string): string[] => query.split('&').sort();

describe('the review console searches', () => {
  test('conversations by user, patient and period are conversation roots, newest first', () => {
    const search = conversationSearch({ user: 'Practitioner/carter', patient: 'maria', from: '2026-01-01', to: '2026-01-31' });
    expect(parameters(search)).toEqual(
      expected('category=ai-conversation&sender=Practitioner/carter&subject=Patient/maria&sent=ge2026-01-01T00:00:00.000Z&sent=lt2026-02-01T00:00:00.000Z&_count=20&_sort=-sent')
    );
  });

  test('an outcome or a model lists the replies that record them, the user as their recipient', () => {
    expect(listsReplies({ outcome: 'failed' })).toBe(true);
    expect(listsReplies({ model: '  ' })).toBe(false);
    expect(parameters(conversationSearch({ outcome: 'failed', model: 'openai/gpt-4o-mini', user: 'Practitioner/carter' }))).toEqual(
      expected('category=ai-response&status=not-done&medium=urn:fhirgate:ai-model|openai/gpt-4o-mini&recipient=Practitioner/carter&_count=20&_sort=-sent')
    );
    expect(conversationSearch({ outcome: 'stopped' }).fields).toContain('medium');
  });

  test("a patient's or a user's disclosures, and device sign-ins by outcome", () => {
    expect(parameters(disclosureSearch({ patient: 'Patient/maria', to: '2026-02-28' }))).toEqual(
      expected('type=http://terminology.hl7.org/CodeSystem/audit-event-type|rest&entity-role=1&entity=Patient/maria&date=lt2026-03-01T00:00:00.000Z&_count=20&_sort=-date')
    );
    expect(parameters(disclosureSearch({ user: 'Practitioner/carter' }))).toContain('agent=Practitioner/carter');
    expect(parameters(deviceSearch({ outcome: 'refused' }))).toEqual(expected('type=http://dicom.nema.org/resources/ontology/DCM|110114&outcome=4&_count=20&_sort=-date'));
  });

  test("the MCP clients' disclosures are those naming no reply; the chat's name one", () => {
    const rest = 'type=http://terminology.hl7.org/CodeSystem/audit-event-type|rest&entity-role=1';
    expect(parameters(disclosureSearch({ recipient: 'mcp', user: 'Practitioner/carter' }))).toEqual(
      expected(`${rest}&entity-role:not=3&agent=Practitioner/carter&_count=20&_sort=-date`)
    );
    expect(parameters(disclosureSearch({ recipient: 'model' }))).toEqual(expected(`${rest}&entity-role=3&_count=20&_sort=-date`));
    expect(parameters(disclosureSearch({}))).toEqual(expected(`${rest}&_count=20&_sort=-date`));
  });
});
