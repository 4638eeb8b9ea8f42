/**
 * The searches of the review console (docs/app.md) on the standalone host's store: a reply's model, a patient's or a
 * user's disclosures and the device sign-ins are answered from the search index, and select what Medplum's matcher
 * selects.
 */
import { parseSearchRequest } from '@medplum/core';
import { MemoryRepository, type FhirRepository } from '@medplum/fhir-router';
import type { AuditEvent, Communication, Resource } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../fhir-definitions.ts';
import { SearchIndexSpec } from './search-index.ts';
import { SqliteRepository } from './sqlite-repository.ts';

const DICOM = 'http://dicom.nema.org/resources/ontology/DCM';

function reply(id: string, model: string, status: Communication['status'], sent: string): Communication {
  return {
    resourceType: 'Communication',
    id,
    status,
    sent,
    category: [{ coding: [{ system: 'urn:fhirgate:communication-category', code: 'ai-response' }] }],
    recipient: [{ reference: 'Practitioner/carter' }],
    medium: [{ coding: [{ system: 'urn:fhirgate:ai-model', code: model }] }],
  };
}

function disclosure(id: string, patient: string, caller: string, recorded: string): AuditEvent {
  return {
    resourceType: 'AuditEvent',
    id,
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
    recorded,
    outcome: '0',
    agent: [{ who: { reference: caller }, requestor: true }, { who: { reference: 'Device/agent' }, requestor: false }],
    source: { observer: { reference: 'Device/agent' } },
    entity: [{ what: { reference: patient }, role: { code: '1' } }, { what: { reference: `Communication/${id}-reply` }, role: { code: '3' } }],
  };
}

/** An MCP client's disclosure: no reply, the client named only by display (plugin/mcp/mcp-tools.ts). */
function mcpDisclosure(id: string, patient: string, caller: string, recorded: string): AuditEvent {
  return {
    ...disclosure(id, patient, caller, recorded),
    agent: [{ who: { reference: caller }, requestor: true }, { who: { display: 'MCP client: Claude Code 2.1.0' }, requestor: false }],
    source: { observer: { display: 'fhirgate MCP server' } },
    entity: [{ what: { reference: patient }, role: { code: '1' } }, { what: { reference: 'Observation/k' }, role: { code: '4' } }],
  };
}

function deviceSignIn(id: string, outcome: AuditEvent['outcome'], recorded: string): AuditEvent {
  return {
    resourceType: 'AuditEvent',
    id,
    type: { system: DICOM, code: '110114' },
    subtype: [{ system: DICOM, code: '110122' }],
    recorded,
    outcome,
    agent: [{ who: { reference: 'Device/monitor' }, requestor: true }],
    source: { observer: { display: 'fhirgate device token exchange' } },
  };
}

const RESOURCES: Resource[] = [
  reply('r1', 'openai/gpt-4o-mini', 'completed', '2026-01-01T10:00:00.000Z'),
  reply('r2', 'anthropic/claude-haiku-4-5', 'stopped', '2026-01-02T10:00:00.000Z'),
  reply('r3', 'openai/gpt-4o-mini', 'not-done', '2026-01-03T10:00:00.000Z'),
  disclosure('d1', 'Patient/maria', 'Practitioner/carter', '2026-01-01T10:00:00.000Z'),
  disclosure('d2', 'Patient/maria', 'Practitioner/other', '2026-01-05T10:00:00.000Z'),
  disclosure('d3', 'Patient/john', 'Practitioner/carter', '2026-01-06T10:00:00.000Z'),
  mcpDisclosure('m1', 'Patient/maria', 'Practitioner/carter', '2026-01-04T10:00:00.000Z'),
  deviceSignIn('s1', '0', '2026-01-01T09:00:00.000Z'),
  deviceSignIn('s2', '4', '2026-01-02T09:00:00.000Z'),
];

const SEARCHES = [
  'Communication?medium=urn:fhirgate:ai-model|openai/gpt-4o-mini&_sort=-sent',
  'Communication?medium=urn:fhirgate:ai-model|anthropic/claude-haiku-4-5&status=stopped',
  'Communication?status=not-done&recipient=Practitioner/carter&_sort=-sent',
  'AuditEvent?entity=Patient/maria&_sort=-date',
  'AuditEvent?entity=Patient/maria&date=ge2026-01-02&date=le2026-01-31&_sort=-date',
  'AuditEvent?agent=Practitioner/carter&_sort=-date',
  'AuditEvent?entity-role=1&type=http://terminology.hl7.org/CodeSystem/audit-event-type|rest&_sort=-date',
  `AuditEvent?type=${DICOM}|110114&outcome=4&_sort=-date`,
  // Where the records went: to an MCP client (no reply named), or to the chat's model (a reply named).
  'AuditEvent?entity-role=1&entity-role:not=3&type=http://terminology.hl7.org/CodeSystem/audit-event-type|rest&_sort=-date',
  'AuditEvent?entity-role=1&entity-role=3&agent=Practitioner/carter&_sort=-date',
];

async function ids(repository: FhirRepository, query: string): Promise<string[]> {
  const bundle = await repository.search(parseSearchRequest(query));
  return bundle.entry?.map((entry) => entry.resource?.id ?? '') ?? [];
}

describe('the review console searches on the standalone store', () => {
  let sqlite: SqliteRepository;
  let memory: MemoryRepository;

  beforeAll(async () => {
    loadFhirDefinitions();
    sqlite = SqliteRepository.open(':memory:');
    memory = new MemoryRepository();
    for (const resource of RESOURCES) {
      await sqlite.createResource(resource, { assignedId: true });
      await memory.createResource(resource, { assignedId: true });
    }
  });

  afterAll(() => sqlite.close());

  test.each(SEARCHES)('%s selects what the matcher selects, in the same order', async (query) => {
    const found = await ids(sqlite, query);
    expect(found.length).toBeGreaterThan(0);
    expect(found).toEqual(await ids(memory, query));
  });

  test('a reply is found by its model, and a patient by its disclosures, newest first', async () => {
    expect(await ids(sqlite, 'Communication?medium=urn:fhirgate:ai-model|openai/gpt-4o-mini&_sort=-sent')).toEqual(['r3', 'r1']);
    expect(await ids(sqlite, 'AuditEvent?entity=Patient/maria&_sort=-date')).toEqual(['d2', 'm1', 'd1']);
  });

  test("an MCP client's disclosures are told from the chat's by the reply they do not name", async () => {
    expect(await ids(sqlite, 'AuditEvent?entity-role=1&entity-role:not=3&_sort=-date')).toEqual(['m1']);
    expect(await ids(sqlite, 'AuditEvent?entity=Patient/maria&entity-role=1&entity-role=3&_sort=-date')).toEqual(['d2', 'd1']);
  });

  test('the parameters are in the index, so the searches read index rows rather than every record of the type', () => {
    const spec = new SearchIndexSpec();
    expect([...spec.parametersFor('AuditEvent').keys()]).toEqual(expect.arrayContaining(['type', 'entity', 'entity-role', 'agent', 'date', 'outcome']));
    expect(spec.rowsFor(RESOURCES[0])).toContainEqual({ param: 'medium', value: 'openai/gpt-4o-mini', extra: 'urn:fhirgate:ai-model' });
    expect(spec.sortedLookupFor('AuditEvent', 'entity', 'date')).toBeDefined();
    expect(spec.sortedLookupFor('AuditEvent', 'agent', 'date')).toBeDefined();
  });
});
