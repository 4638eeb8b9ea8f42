import type { AuditEvent, Communication } from '@medplum/fhirtypes';
import { buildExportBundle, repliesOf } from './export-bundle.ts';

describe("an auditor's export", () => {
  test('is a collection Bundle holding each record once, with its URL on the server', () => {
    const reply: Communication = { resourceType: 'Communication', id: 'r', status: 'completed' };
    const event: AuditEvent = { resourceType: 'AuditEvent', id: 'e', type: { code: 'rest' }, recorded: '2026-01-01T00:00:00Z', agent: [], source: { observer: {} } };
    const bundle = buildExportBundle('https://fhir.example.org/', [reply, event, reply], '2026-01-02T00:00:00.000Z');
    expect(bundle).toMatchObject({ resourceType: 'Bundle', type: 'collection', timestamp: '2026-01-02T00:00:00.000Z', total: 2 });
    expect(bundle.entry?.map((entry) => entry.fullUrl)).toEqual(['https://fhir.example.org/fhir/R4/Communication/r', 'https://fhir.example.org/fhir/R4/AuditEvent/e']);
  });

  test('finds the replies a disclosure was sent for (its report entity), not the records shared', () => {
    const event = (reply: string): AuditEvent => ({
      resourceType: 'AuditEvent',
      type: { code: 'rest' },
      recorded: '2026-01-01T00:00:00Z',
      agent: [],
      source: { observer: {} },
      entity: [
        { what: { reference: 'Patient/maria' }, role: { code: '1' } },
        { what: { reference: 'Observation/k' }, role: { code: '4' } },
        { what: { reference: reply }, role: { code: '3' } },
      ],
    });
    expect(repliesOf([event('Communication/a'), event('Communication/b'), event('Communication/a')])).toEqual(['Communication/a', 'Communication/b']);
  });
});
