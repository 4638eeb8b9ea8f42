/**
 * A Communication's references (part-of, subject, sender, recipient) are indexed only as the rows of their sorted
 * lookup by `sent` (search-index.ts, PAIRED_ONLY): a fifth fewer rows a chat turn, and every search on them still
 * finds what Medplum's own repository finds, with or without a `sent`.
 */
import { parseSearchRequest } from '@medplum/core';
import { MemoryRepository, type FhirRepository } from '@medplum/fhir-router';
import type { Communication } from '@medplum/fhirtypes';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { SqliteRepository } from './sqlite-repository.ts';

const communications: Communication[] = [
  { resourceType: 'Communication', id: 'root', status: 'in-progress', sender: { reference: 'Practitioner/p1' }, recipient: [{ reference: 'Device/agent' }], sent: '2024-01-01T10:00:00.000Z' },
  ...Array.from({ length: 6 }, (_, turn): Communication => ({
    resourceType: 'Communication',
    id: `turn-${turn}`,
    status: 'completed',
    partOf: [{ reference: 'Communication/root' }],
    subject: turn % 2 === 0 ? { reference: 'Patient/a' } : undefined,
    sender: turn % 3 === 0 ? { display: 'someone without a reference' } : { reference: turn % 2 === 0 ? 'Practitioner/p1' : 'Device/agent' },
    recipient: turn === 4 ? [{ reference: 'Device/agent' }, { reference: 'Practitioner/p2' }] : [{ reference: 'Device/agent' }],
    // Turns 1 and 5 have no `sent`: their references are still found.
    sent: turn === 1 || turn === 5 ? undefined : `2024-01-0${turn + 2}T10:00:00.000Z`,
  })),
];

const QUERIES = [
  'Communication?part-of=Communication/root',
  'Communication?part-of=Communication/root&_sort=-sent',
  'Communication?part-of=Communication/root&_sort=sent&_count=2&_offset=1',
  'Communication?part-of:not=Communication/root',
  'Communication?part-of:missing=true',
  'Communication?sender=Practitioner/p1',
  'Communication?sender=Practitioner/p1,Device/agent&_sort=-sent',
  'Communication?sender:missing=false',
  'Communication?recipient=Practitioner/p2',
  'Communication?recipient=Device/agent&subject=Patient/a',
  'Communication?subject=Patient/a&_sort=sent',
  'Communication?subject:missing=true',
  'Communication?_sort=sender',
  'Communication?part-of=Communication/root&sent=lt2024-01-05',
];

let directory: string;
let sqlite: SqliteRepository;
let memory: FhirRepository;

beforeAll(async () => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-paired-'));
  sqlite = SqliteRepository.open(join(directory, 'store.sqlite'));
  memory = new MemoryRepository();
  for (const communication of communications) {
    await sqlite.createResource(communication, { assignedId: true });
    await memory.createResource(communication, { assignedId: true });
  }
});

afterAll(() => {
  sqlite.close();
  rmSync(directory, { recursive: true, force: true });
});

/** Whether a Communication has a value to sort by (the order of those without one is the store's own). */
function sortable(id: string | undefined, code: string): boolean {
  const communication = communications.find((candidate) => candidate.id === id);
  return code === 'sent' ? communication?.sent !== undefined : communication?.sender?.reference !== undefined;
}

test.each(QUERIES)('%s finds what Medplum’s repository finds', async (query) => {
  const request = parseSearchRequest(query);
  const found = (await sqlite.searchResources(request)).map((resource) => resource.id);
  const expected = (await memory.searchResources(request)).map((resource) => resource.id);
  expect([...found].sort()).toEqual([...expected].sort());
  expect(found.length).toBeGreaterThan(0);
  const sortCode = request.sortRules?.[0]?.code;
  if (sortCode) {
    expect(found.filter((id) => sortable(id, sortCode))).toEqual(expected.filter((id) => sortable(id, sortCode)));
  }
});

test('a Communication’s references have only their sorted lookup’s rows', () => {
  const database = new DatabaseSync(join(directory, 'store.sqlite'), { readOnly: true });
  try {
    const params = database
      .prepare(
        "SELECT DISTINCT p.name AS param FROM search_index s JOIN resources r ON r.pk = s.resource_pk JOIN search_params p ON p.code = s.param WHERE r.id = 'turn-4' ORDER BY p.name"
      )
      .all()
      .map((row) => String(row.param));
    expect(params).toEqual(expect.arrayContaining(['part-of>sent', 'recipient>sent', 'sender>sent', 'subject>sent', 'sent', 'status']));
    expect(params.filter((param) => ['part-of', 'sender', 'recipient', 'subject'].includes(param))).toEqual([]);
  } finally {
    database.close();
  }
});
