import { matchesSearchRequest, Operator, parseSearchRequest, type Filter, type SearchRequest } from '@medplum/core';
import { MemoryRepository, type FhirRepository } from '@medplum/fhir-router';
import type { Communication, Device, Observation, Resource } from '@medplum/fhirtypes';
import { ResourceStore } from './resource-store.ts';
import { SqliteRepository } from './sqlite-repository.ts';
import { statusOf } from '../../../../test/support/rejection-status.ts';

const CATEGORY_SYSTEM = 'http://fhirgate.dev/category';
const TURN_SYSTEM = 'urn:fhirgate:turn';

/** Ten chat turns in two conversations (a: even turns, b: odd turns), the two conversations and a few others. */
function seedResources(): Resource[] {
  const conversations: Communication[] = ['a', 'b'].map((name) => ({
    resourceType: 'Communication',
    id: `conv-${name}`,
    status: 'in-progress',
    category: [{ coding: [{ system: CATEGORY_SYSTEM, code: 'conversation' }] }],
    meta: { project: 'project-a' },
  }));
  const turns: Communication[] = Array.from({ length: 10 }, (_, turn) => ({
    resourceType: 'Communication',
    id: `turn-${turn}`,
    meta: { project: turn < 7 ? 'project-a' : 'project-b' },
    status: turn === 9 ? 'entered-in-error' : 'completed',
    identifier: [{ system: TURN_SYSTEM, value: `Turn-${turn}` }],
    partOf: [{ reference: `Communication/conv-${turn % 2 === 0 ? 'a' : 'b'}` }],
    subject: { reference: `Patient/p${turn % 3}` },
    sender: { reference: `Device/d${turn % 2}` },
    recipient: [{ reference: 'Practitioner/x' }],
    category: [{ text: 'Chat Turn', coding: [{ system: CATEGORY_SYSTEM, code: turn % 3 === 0 ? 'prompt' : 'reply' }] }],
    medium: [{ coding: [{ code: turn % 2 === 0 ? 'WRITTEN' : 'VERBAL' }] }],
    // Turn 4 was sent in another time zone: 2024-01-05T10:00+05:00 is 05:00Z.
    sent: turn === 4 ? '2024-01-05T10:00:00+05:00' : `2024-01-${String(turn + 1).padStart(2, '0')}T10:00:00.000Z`,
    ...(turn === 3 ? {} : { received: `2024-02-${String(10 - turn).padStart(2, '0')}T00:00:00.000Z` }),
    payload: [{ contentString: `message ${turn}` }],
  }));
  const observation: Observation = {
    resourceType: 'Observation',
    id: 'obs-1',
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    subject: { reference: 'Patient/p0' },
    device: { reference: 'Device/d0' },
    identifier: [{ system: 'urn:obs', value: 'o1' }],
  };
  const device: Device = { resourceType: 'Device', id: 'd0', status: 'active', identifier: [{ system: 'urn:dev', value: 'serial-0' }] };
  return [...conversations, ...turns, observation, device];
}

async function seed(repository: FhirRepository): Promise<void> {
  for (const resource of seedResources()) {
    await repository.createResource(resource, { assignedId: true });
  }
}

let repository: SqliteRepository;

beforeEach(async () => {
  repository = SqliteRepository.open(':memory:');
  await seed(repository);
});

afterEach(() => {
  repository.close();
});

async function ids(query: string): Promise<string[]> {
  const [resourceType, search] = query.split('?');
  const bundle = await repository.search(parseSearchRequest(`${resourceType}?${search ?? ''}`));
  return bundle.entry?.map((entry) => entry.resource?.id as string) ?? [];
}

async function idSet(query: string): Promise<string[]> {
  return (await ids(query)).sort();
}


describe('SqliteRepository search filters', () => {
  test('part-of, subject, sender and recipient (references)', async () => {
    expect(await idSet('Communication?part-of=Communication/conv-a')).toEqual(['turn-0', 'turn-2', 'turn-4', 'turn-6', 'turn-8']);
    expect(await idSet('Communication?part-of=Communication/conv-a,Communication/conv-b&_count=100')).toHaveLength(10);
    expect(await idSet('Communication?subject=Patient/p1')).toEqual(['turn-1', 'turn-4', 'turn-7']);
    expect(await idSet('Communication?sender=Device/d1&subject=Patient/p1')).toEqual(['turn-1', 'turn-7']);
    expect(await idSet('Communication?recipient=Practitioner/x&_count=3')).toHaveLength(3);
    expect(await idSet('Communication?part-of=Communication/none')).toEqual([]);
  });

  test('category as system|code, code, |code, system| and text; case-insensitive as the matcher is', async () => {
    expect(await idSet(`Communication?category=${CATEGORY_SYSTEM}|prompt`)).toEqual(['turn-0', 'turn-3', 'turn-6', 'turn-9']);
    expect(await idSet('Communication?category=PROMPT')).toEqual(['turn-0', 'turn-3', 'turn-6', 'turn-9']);
    expect(await idSet('Communication?category=|prompt')).toEqual([]);
    expect(await idSet(`Communication?category=${CATEGORY_SYSTEM}|&_count=100`)).toHaveLength(12);
    expect(await idSet('Communication?category=chat turn&_count=100')).toHaveLength(10);
    expect(await idSet(`Communication?category=${CATEGORY_SYSTEM}|conversation,prompt`)).toEqual([
      'conv-a',
      'conv-b',
      'turn-0',
      'turn-3',
      'turn-6',
      'turn-9',
    ]);
  });

  test('identifier, status and _id (tokens)', async () => {
    expect(await idSet(`Communication?identifier=${TURN_SYSTEM}|turn-5`)).toEqual(['turn-5']);
    expect(await idSet('Communication?identifier=Turn-5')).toEqual(['turn-5']);
    expect(await idSet('Communication?identifier=urn:other|turn-5')).toEqual([]);
    expect(await idSet('Communication?status=entered-in-error')).toEqual(['turn-9']);
    expect(await idSet('Communication?_id=turn-1,turn-2,missing')).toEqual(['turn-1', 'turn-2']);
    expect(await idSet('Communication?_id=turn-1&part-of=Communication/conv-a')).toEqual([]);
  });

  test('sent ranges compare instants, whatever the time zone', async () => {
    expect(await idSet('Communication?sent=gt2024-01-08')).toEqual(['turn-8', 'turn-9']);
    expect(await idSet('Communication?sent=lt2024-01-03')).toEqual(['turn-0', 'turn-1']);
    expect(await idSet('Communication?sent=ge2024-01-03&sent=le2024-01-04')).toEqual(['turn-2', 'turn-3']);
    expect(await idSet('Communication?sent=2024-01-05')).toEqual(['turn-4']);
    expect(await idSet('Communication?sent=lt2024-01-05T06:00:00Z&sent=gt2024-01-04T12:00:00Z')).toEqual(['turn-4']);
    expect(await idSet('Communication?sent=sa2024-01-09')).toEqual(['turn-9']);
    expect(await idSet('Communication?sent=eb2024-01-02')).toEqual(['turn-0']);
    expect(await idSet('Communication?part-of=Communication/conv-b&sent=gt2024-01-06')).toEqual(['turn-7', 'turn-9']);
  });

  test('_lastUpdated and _project', async () => {
    const before = new Date(Date.now() - 60_000).toISOString();
    const after = new Date(Date.now() + 60_000).toISOString();
    expect(await idSet(`Communication?_lastUpdated=gt${before}&_count=100`)).toHaveLength(12);
    expect(await idSet(`Communication?_lastUpdated=gt${after}`)).toEqual([]);
    expect(await idSet('Communication?_project=project-b')).toEqual(['turn-7', 'turn-8', 'turn-9']);
    expect(await idSet('Communication?_project=PROJECT-B&part-of=Communication/conv-a')).toEqual(['turn-8']);
    expect(await idSet('Communication?_project=sys|project-b')).toEqual([]);
  });

  test('parameters outside the index fall back to the matcher', async () => {
    expect(await idSet('Communication?medium=written&_count=100')).toEqual(['turn-0', 'turn-2', 'turn-4', 'turn-6', 'turn-8']);
    expect(await idSet('Communication?received=lt2024-02-03')).toEqual(['turn-8', 'turn-9']);
    expect(await idSet('Communication?status:not=completed')).toEqual(['conv-a', 'conv-b', 'turn-9']);
    expect(await idSet('Communication?part-of:missing=true')).toEqual(['conv-a', 'conv-b']);
    expect(await idSet('Communication?part-of=conv-a')).toEqual([]);
    expect(await idSet('Communication?medium=verbal&part-of=Communication/conv-b&_count=2')).toEqual(['turn-1', 'turn-3']);
  });

  test('Observation and Device by their indexed parameters', async () => {
    expect(await ids('Observation?code=http://loinc.org|8867-4')).toEqual(['obs-1']);
    expect(await ids('Observation?device=Device/d0&subject=Patient/p0&status=final&identifier=o1')).toEqual(['obs-1']);
    expect(await ids('Device?identifier=urn:dev|serial-0&status=active')).toEqual(['d0']);
  });

  test('unknown and chained parameters are 400, as on Medplum', async () => {
    const unknown = { resourceType: 'Communication' as const, filters: [{ code: 'nope', operator: Operator.EQUALS, value: 'x' }] };
    expect(await statusOf(repository.search(unknown))).toBe(400);
    expect(await statusOf(repository.search(parseSearchRequest('Communication?subject:Patient.name=x')))).toBe(400);
    expect(await statusOf(repository.search(parseSearchRequest('Communication?_sort=nope')))).toBe(400);
  });
});

describe('SqliteRepository search results', () => {
  test('entries are matches; default count is 20', async () => {
    for (let index = 0; index < 25; index++) {
      await repository.createResource<Communication>({ resourceType: 'Communication', status: 'preparation' });
    }
    const bundle = await repository.search(parseSearchRequest('Communication?status=preparation'));
    expect(bundle.type).toBe('searchset');
    expect(bundle.entry).toHaveLength(20);
    expect(bundle.entry?.every((entry) => entry.search?.mode === 'match')).toBe(true);
    expect(bundle.total).toBeUndefined();
  });

  test('_sort on an indexed date, ascending and descending, with paging', async () => {
    expect(await ids('Communication?part-of=Communication/conv-a&_sort=sent')).toEqual(['turn-0', 'turn-2', 'turn-4', 'turn-6', 'turn-8']);
    expect(await ids('Communication?part-of=Communication/conv-a&_sort=-sent')).toEqual(['turn-8', 'turn-6', 'turn-4', 'turn-2', 'turn-0']);
    expect(await ids('Communication?part-of=Communication/conv-a&_sort=-sent&_offset=1&_count=2')).toEqual(['turn-6', 'turn-4']);
    expect(await ids('Communication?part-of=Communication/conv-a&_sort=sent&_offset=4&_count=2')).toEqual(['turn-8']);
    expect(await ids('Communication?part-of=Communication/conv-a&_sort=sent&_offset=9')).toEqual([]);
  });

  test('_sort puts resources without a value last ascending and first descending', async () => {
    expect(await ids('Communication?category=conversation,prompt&_sort=sent')).toEqual([
      'turn-0',
      'turn-3',
      'turn-6',
      'turn-9',
      'conv-a',
      'conv-b',
    ]);
    // Ties follow insertion order in the direction of the first rule.
    expect(await ids('Communication?category=conversation,prompt&_sort=-sent')).toEqual([
      'conv-b',
      'conv-a',
      'turn-9',
      'turn-6',
      'turn-3',
      'turn-0',
    ]);
  });

  test('an index lookup sorted on the index pages the candidates that pass the other filters, in order, once each', async () => {
    // conv-b holds turns 1, 3, 5, 7, 9; turns 7 and 9 are in project-b.
    expect(await ids('Communication?part-of=Communication/conv-b&_project=project-a&_sort=-sent')).toEqual(['turn-5', 'turn-3', 'turn-1']);
    expect(await ids('Communication?part-of=Communication/conv-b&_project=project-a&_sort=-sent&_count=1&_offset=1')).toEqual(['turn-3']);
    const counted = await repository.search(parseSearchRequest('Communication?part-of=Communication/conv-b&_project=project-a&_sort=sent&_count=1&_total=accurate'));
    expect(counted.entry?.map((entry) => entry.resource?.id)).toEqual(['turn-1']);
    expect(counted.total).toBe(3);
    // An inexact filter (medium is not indexed) is checked per candidate; the total counts what passed.
    const inexact = await repository.search(parseSearchRequest('Communication?part-of=Communication/conv-a&medium=written&_sort=-sent&_count=2&_offset=1&_total=accurate'));
    expect(inexact.entry?.map((entry) => entry.resource?.id)).toEqual(['turn-6', 'turn-4']);
    expect(inexact.total).toBe(5);
    // A turn matching both looked-up values has two index rows, and is still one result.
    expect(await ids('Communication?category=chat turn,reply&_sort=-sent&_count=4')).toEqual(['turn-9', 'turn-8', 'turn-7', 'turn-6']);
  });

  test("one conversation's messages by sent come from one ordered index read, in the sort's order, those without sent at the open end", async () => {
    const sent = ['2024-03-02T00:00:00Z', undefined, '2024-03-01T00:00:00+02:00', '2024-03-02T00:00:00Z', '2024-02-28T23:59:59.999Z'];
    for (const [index, value] of sent.entries()) {
      await repository.createResource<Communication>({
        resourceType: 'Communication',
        id: `long-${index}`,
        status: 'completed',
        partOf: [{ reference: 'Communication/conv-long' }],
        ...(value ? { sent: value } : {}),
      }, { assignedId: true });
    }
    // Newest first; the one without sent first descending; the two sent together by insertion order, reversed.
    expect(await ids('Communication?part-of=Communication/conv-long&_sort=-sent')).toEqual(['long-1', 'long-3', 'long-0', 'long-2', 'long-4']);
    expect(await ids('Communication?part-of=Communication/conv-long&_sort=sent')).toEqual(['long-4', 'long-2', 'long-0', 'long-3', 'long-1']);
    expect(await ids('Communication?part-of=Communication/conv-long&_sort=-sent&_count=2&_offset=1')).toEqual(['long-3', 'long-0']);
    // A message that moves to another conversation leaves this one's order.
    const moved = await repository.readResource<Communication>('Communication', 'long-3');
    await repository.updateResource<Communication>({ ...moved, partOf: [{ reference: 'Communication/conv-other' }] });
    expect(await ids('Communication?part-of=Communication/conv-long&_sort=-sent')).toEqual(['long-1', 'long-0', 'long-2', 'long-4']);
  });

  test("candidates read from one filter's index rows are checked against every other filter, and a filter that did not supply them against its own", async () => {
    const readings: [string, string, string, string, string][] = [
      ['obs-2', 'Device/d1', 'Patient/p0', 'http://loinc.org', '2024-01-02'],
      ['obs-3', 'Device/d0', 'Patient/p1', 'http://loinc.org', '2024-01-03'],
      ['obs-4', 'Device/d0', 'Patient/p0', 'http://loinc.org', '2024-01-04'],
      ['obs-5', 'Device/d0', 'Patient/p0', 'urn:other-system', '2024-01-05'],
    ];
    for (const [id, device, patient, system, date] of readings) {
      await repository.createResource<Observation>(
        { resourceType: 'Observation', id, status: 'final', code: { coding: [{ system, code: '8867-4' }] }, subject: { reference: patient }, device: { reference: device }, effectiveDateTime: date },
        { assignedId: true }
      );
    }
    // The device drives (its rows have no date order); the page comes in order from the patient's rows, the device
    // checked on each.
    expect(await ids('Observation?device=Device/d0&patient=Patient/p0&_sort=-date')).toEqual(['obs-1', 'obs-5', 'obs-4']);
    // The patient drives and orders: its rows supply the candidates, the device and the code are checked on each.
    expect(await ids('Observation?patient=Patient/p0&device=Device/d0&_sort=-date')).toEqual(['obs-1', 'obs-5', 'obs-4']);
    expect(await ids('Observation?patient=Patient/p0&code=http://loinc.org|8867-4&_sort=-date')).toEqual(['obs-1', 'obs-4', 'obs-2']);
    // Read whole from the rows of each of the driver's values.
    expect(await idSet('Observation?device=Device/d0,Device/d1&patient=Patient/p1')).toEqual(['obs-3']);
    // A token's rows hold its code, not its system: the system is checked on each candidate.
    expect(await idSet('Observation?code=http://loinc.org|8867-4&device=Device/d0')).toEqual(['obs-1', 'obs-3', 'obs-4']);
  });

  test("a conversation's page, read from the conversation's own index rows, is not checked against the conversation again row by row", async () => {
    const conversationParams: number[] = [];
    const { queryAll, queryArrays } = ResourceStore.prototype;
    const counted = (params: readonly unknown[]): void => {
      if (params.includes('Communication/conv-a')) {
        conversationParams.push(params.filter((param) => param === 'Communication/conv-a').length);
      }
    };
    ResourceStore.prototype.queryAll = function (this: ResourceStore, sql, params) {
      counted(params);
      return queryAll.call(this, sql, params);
    };
    ResourceStore.prototype.queryArrays = function (this: ResourceStore, sql, params) {
      counted(params);
      return queryArrays.call(this, sql, params);
    };
    try {
      expect(await ids('Communication?part-of=Communication/conv-a&category:not=prompt&_sort=-sent')).toEqual(['turn-8', 'turn-4', 'turn-2']);
      // Without _sort: its rows counted (few: read them all), then read whole.
      expect(await idSet('Communication?part-of=Communication/conv-a&category:not=prompt')).toEqual(['turn-2', 'turn-4', 'turn-8']);
    } finally {
      ResourceStore.prototype.queryAll = queryAll;
      ResourceStore.prototype.queryArrays = queryArrays;
    }
    // Each statement names the conversation once: in its range read (or count).
    expect(conversationParams).toEqual([1, 1, 1]);
  });

  test('_sort with an inexact filter pages after checking each candidate', async () => {
    expect(await ids('Communication?medium=written&_sort=-sent&_count=2')).toEqual(['turn-8', 'turn-6']);
    expect(await ids('Communication?medium=written&_sort=-sent&_count=2&_offset=2')).toEqual(['turn-4', 'turn-2']);
  });

  test('_sort on a parameter outside the index sorts in memory', async () => {
    expect(await ids('Communication?part-of=Communication/conv-b&_sort=received')).toEqual(['turn-9', 'turn-7', 'turn-5', 'turn-1', 'turn-3']);
    expect(await ids('Communication?part-of=Communication/conv-b&_sort=-received&_count=2&_offset=1')).toEqual(['turn-1', 'turn-5']);
    expect(await ids('Communication?_sort=status,-sent&_count=4')).toEqual(['turn-8', 'turn-7', 'turn-6', 'turn-5']);
  });

  test('_sort on several indexed parameters and on _id, _lastUpdated', async () => {
    expect(await ids('Communication?part-of=Communication/conv-a,Communication/conv-b&_sort=sender,-sent&_count=4')).toEqual([
      'turn-8',
      'turn-6',
      'turn-4',
      'turn-2',
    ]);
    expect(await ids('Communication?subject=Patient/p0&_sort=-_id')).toEqual(['turn-9', 'turn-6', 'turn-3', 'turn-0']);
    expect(await ids('Device?_sort=-_lastUpdated')).toEqual(['d0']);
    const newest = await repository.createResource<Communication>({ resourceType: 'Communication', status: 'completed' });
    expect((await ids('Communication?_sort=-_lastUpdated&_count=1'))[0]).toBe(newest.id);
  });

  test('total when asked: exact and inexact plans, and a count-only search', async () => {
    const accurate = await repository.search(parseSearchRequest('Communication?part-of=Communication/conv-a&_total=accurate&_count=2'));
    expect(accurate.total).toBe(5);
    expect(accurate.entry).toHaveLength(2);
    const inexact = await repository.search(parseSearchRequest('Communication?medium=verbal&_sort=sent&_total=accurate&_count=1'));
    expect(inexact.total).toBe(5);
    expect(inexact.entry?.[0]?.resource?.id).toBe('turn-1');
    const inMemory = await repository.search(parseSearchRequest('Communication?_sort=received&_total=estimate&_count=1'));
    expect(inMemory.total).toBe(12);
    const countOnly = await repository.search(parseSearchRequest('Communication?_summary=count'));
    expect(countOnly.total).toBe(12);
    expect(countOnly.entry).toBeUndefined();
    const none = await repository.search(parseSearchRequest('Communication?_project=sys|x&_total=accurate'));
    expect(none.total).toBe(0);
  });

  test('_include and _revinclude add entries in include mode', async () => {
    const included = await repository.search(parseSearchRequest('Communication?_id=turn-1&_include=Communication:part-of'));
    expect(included.entry?.map((entry) => [entry.resource?.id, entry.search?.mode])).toEqual([
      ['turn-1', 'match'],
      ['conv-b', 'include'],
    ]);
    const revIncluded = await repository.search(
      parseSearchRequest('Communication?_id=conv-a&_revinclude=Communication:part-of&_total=accurate')
    );
    expect(revIncluded.total).toBe(1);
    const includedIds = revIncluded.entry?.filter((entry) => entry.search?.mode === 'include').map((entry) => entry.resource?.id);
    expect(includedIds?.sort()).toEqual([
      'turn-0',
      'turn-2',
      'turn-4',
      'turn-6',
      'turn-8',
    ]);
  });

  test('searchByReference groups results by reference', async () => {
    const grouped = await repository.searchByReference<Communication>({ resourceType: 'Communication' }, 'part-of', [
      'Communication/conv-a',
      'Communication/conv-b',
      'Communication/none',
    ]);
    expect(grouped['Communication/conv-a']).toHaveLength(5);
    expect(grouped['Communication/conv-b'].map((resource) => resource.id).sort()).toEqual(['turn-1', 'turn-3', 'turn-5', 'turn-7', 'turn-9']);
    expect(grouped['Communication/none']).toEqual([]);
  });

  test('an update moves a resource between index values; a delete drops it from the index', async () => {
    const turn = await repository.readResource<Communication>('Communication', 'turn-0');
    await repository.updateResource({ ...turn, partOf: [{ reference: 'Communication/conv-b' }] });
    expect(await idSet('Communication?part-of=Communication/conv-a')).toEqual(['turn-2', 'turn-4', 'turn-6', 'turn-8']);
    expect(await idSet('Communication?part-of=Communication/conv-b')).toContain('turn-0');
    await repository.deleteResource('Communication', 'turn-2');
    expect(await idSet('Communication?part-of=Communication/conv-a')).toEqual(['turn-4', 'turn-6', 'turn-8']);
  });
});

describe('SqliteRepository agrees with the matcher', () => {
  const queries = [
    'Communication?part-of=Communication/conv-a',
    'Communication?part-of=Communication/conv-a,Communication/conv-b&status=completed',
    'Communication?subject=Patient/p2&sender=Device/d0',
    'Communication?category=reply&_project=project-a',
    `Communication?category=${CATEGORY_SYSTEM}|reply,conversation`,
    'Communication?category=CHAT TURN&sent=ge2024-01-05',
    'Communication?identifier=turn-3,TURN-4',
    `Communication?identifier=${TURN_SYSTEM}|`,
    'Communication?identifier=|turn-3',
    'Communication?sent=2024-01',
    'Communication?sent=ap2024-01-05',
    'Communication?sent=ne2024-01-05',
    'Communication?sent=lt2024-01-05T05:30:00Z',
    'Communication?recipient=Practitioner/x&medium=verbal',
    'Communication?status=completed,entered-in-error&subject=Patient/p0',
    'Communication?status:not=completed&part-of:missing=false',
    'Communication?_project=project-b,project-a&category=prompt',
    'Communication?_id=turn-1,conv-a&category=conversation',
    'Communication?category=',
    'Communication?category=|',
    'Observation?code=8867-4&device=Device/d0',
    'Device?status=active,inactive',
  ];

  async function expectSameAsMatcher(request: SearchRequest): Promise<void> {
    const memory = new MemoryRepository();
    await seed(memory);
    const expected = (await memory.searchResources({ ...request, count: 1000 })).map((resource) => resource.id).sort();
    const actual = (await repository.searchResources({ ...request, count: 1000 })).map((resource) => resource.id).sort();
    expect(actual).toEqual(expected);
  }

  test.each(queries)('%s', async (query) => {
    await expectSameAsMatcher(parseSearchRequest(query));
  });

  test('date values joined with commas (which the URL parser rejects, but a SearchRequest may hold)', async () => {
    for (const operator of [Operator.EQUALS, Operator.LESS_THAN_OR_EQUALS, Operator.GREATER_THAN, Operator.ENDS_BEFORE]) {
      await expectSameAsMatcher({
        resourceType: 'Communication',
        filters: [{ code: 'sent', operator, value: '2024-01-04,2024-01-09' }],
      });
    }
  });
});

describe('SqliteRepository with a host-defined search parameter', () => {
  test('a SearchParameter registered before open is indexed and searchable (in-response-to)', async () => {
    const { indexSearchParameter } = await import('@medplum/core');
    indexSearchParameter({
      resourceType: 'SearchParameter',
      url: 'https://fhirgate.dev/SearchParameter/communication-in-response-to',
      name: 'in-response-to',
      description: 'The Communication this one answers',
      status: 'active',
      code: 'in-response-to',
      base: ['Communication'],
      type: 'reference',
      expression: 'Communication.inResponseTo',
      target: ['Communication'],
    });
    const store = SqliteRepository.open(':memory:');
    try {
      const prompt = await store.createResource<Communication>({ resourceType: 'Communication', status: 'completed' });
      const reply = await store.createResource<Communication>({
        resourceType: 'Communication',
        status: 'completed',
        inResponseTo: [{ reference: `Communication/${prompt.id}` }],
      });
      const found = await store.searchResources(parseSearchRequest(`Communication?in-response-to=Communication/${prompt.id}`));
      expect(found.map((resource) => resource.id)).toEqual([reply.id]);
    } finally {
      store.close();
    }
  });
});

describe('SqliteRepository agrees with the matcher at the edges of each filter', () => {
  /** Records at the edges: instants at a day's bounds, codings without a system or a code, an id in capitals. */
  const edges: Communication[] = [
    { id: 'day-start', sent: '2024-01-05T00:00:00.000Z', category: [{ coding: [{ code: 'prompt' }] }] },
    { id: 'day-end', sent: '2024-01-05T23:59:59.999Z', category: [{ coding: [{ system: CATEGORY_SYSTEM }] }] },
    { id: 'next-day', sent: '2024-01-06T00:00:00.000Z', instantiatesUri: ['http://example.org/protocols/triage'] },
    { id: 'whole-day', sent: '2024-01-05', subject: { display: 'no reference' } },
    { id: 'Upper-Case', partOf: [{ reference: 'Communication/conv-a' }], meta: { project: 'Project-C' } },
  ].map((edge) => ({ resourceType: 'Communication', status: 'completed', meta: { project: 'project-a' }, ...edge }));

  beforeEach(async () => {
    for (const edge of edges) {
      await repository.createResource(edge, { assignedId: true });
    }
  });

  /** The search's answer is what Medplum's matcher accepts of every stored resource of the type. */
  async function expectMatcherAnswer(request: SearchRequest): Promise<void> {
    const stored = await repository.searchResources({ resourceType: request.resourceType, count: 1000 });
    const expected = stored.filter((resource) => matchesSearchRequest(resource, request)).map((resource) => resource.id).sort();
    const actual = (await repository.searchResources({ ...request, count: 1000 })).map((resource) => resource.id).sort();
    expect({ filters: request.filters, ids: actual }).toEqual({ filters: request.filters, ids: expected });
  }

  test(':missing and :present, each way, on indexed parameters', async () => {
    for (const query of ['part-of:missing=true', 'part-of:missing=false', 'part-of:present=true', 'part-of:present=false', 'sent:missing=true', 'category:present=false', 'subject:missing=false']) {
      await expectMatcherAnswer(parseSearchRequest(`Communication?${query}`));
    }
  });

  test(':not and ne on ids, projects, references, tokens and dates', async () => {
    for (const query of ['_id:not=turn-1', '_project:not=project-a', 'subject:not=Patient/p1', 'category:not=prompt', 'category:not=|', 'identifier:not=turn-3', 'sent=ne2024-01-05', '_lastUpdated=ne2024-01-05']) {
      await expectMatcherAnswer(parseSearchRequest(`Communication?${query}`));
    }
  });

  test('tokens: a code without a system, a system without a code, and empty parts', async () => {
    for (const query of ['category=|prompt', `category=${CATEGORY_SYSTEM}|`, `category=${CATEGORY_SYSTEM}|,|prompt`, `category=${CATEGORY_SYSTEM}|,reply`, 'category=|', 'category=prompt,|', 'category=,prompt', 'identifier=|turn-3']) {
      await expectMatcherAnswer(parseSearchRequest(`Communication?${query}`));
    }
  });

  test('references without a type: by id where the parameter has one target type, else nothing', async () => {
    for (const query of ['Observation?patient=p0', 'Observation?patient=Patient/p0,p0', 'Observation?patient=Patient/p9,p0', 'Observation?patient=p1', 'Communication?subject=p1', 'Communication?subject=Patient/p1,Patient/p1']) {
      await expectMatcherAnswer(parseSearchRequest(query));
    }
  });

  test('_project and _id: with and without a system, several at once, in any case', async () => {
    for (const query of ['_project=project-a,project-b', '_project=|project-b', '_project=sys|project-b,project-b', '_project=sys|', '_project=project-c', '_project=', '_id=|turn-1', '_id=sys|turn-1', '_id=TURN-1,|upper-case', '_id=|', '_id=sys|', '_id=turn-1,turn-2&_id=turn-2,turn-3', '_id=turn-1&_id=conv-a']) {
      await expectMatcherAnswer(parseSearchRequest(`Communication?${query}&_count=1000`));
    }
  });

  test('a parameter of a type the index does not hold (uri) decides as the matcher does', async () => {
    await expectMatcherAnswer(parseSearchRequest('Communication?instantiates-uri=example.org/protocols'));
    await expectMatcherAnswer(parseSearchRequest('Communication?instantiates-uri=http://example.org/protocols/triage'));
  });

  test('every date comparison at the bounds of a day, of an instant and of a time zone', async () => {
    const operators = [
      Operator.EQUALS,
      Operator.APPROXIMATELY,
      Operator.LESS_THAN,
      Operator.GREATER_THAN,
      Operator.LESS_THAN_OR_EQUALS,
      Operator.GREATER_THAN_OR_EQUALS,
      Operator.STARTS_AFTER,
      Operator.ENDS_BEFORE,
      Operator.NOT_EQUALS,
      Operator.CONTAINS,
    ];
    const values = ['2024-01-05', '2024-01-05T00:00:00.000Z', '2024-01-05T23:59:59.999Z', '2024-01-06T00:00:00.000Z', '2024-01-06T05:00:00+05:00', '2024-01', '2024-01-05,2024-01-06', ''];
    for (const operator of operators) {
      for (const value of values) {
        const filter: Filter = { code: 'sent', operator, value };
        await expectMatcherAnswer({ resourceType: 'Communication', filters: [filter] });
      }
    }
  });

  test('_lastUpdated compared at the instant a record was stored', async () => {
    const { meta } = await repository.readResource<Communication>('Communication', 'day-end');
    const instant = meta?.lastUpdated as string;
    for (const operator of [Operator.EQUALS, Operator.LESS_THAN, Operator.GREATER_THAN, Operator.LESS_THAN_OR_EQUALS, Operator.GREATER_THAN_OR_EQUALS, Operator.STARTS_AFTER, Operator.ENDS_BEFORE]) {
      await expectMatcherAnswer({ resourceType: 'Communication', filters: [{ code: '_lastUpdated', operator, value: instant }] });
    }
    // No comparison the matcher makes, or no value it can read: nothing.
    await expectMatcherAnswer({ resourceType: 'Communication', filters: [{ code: '_lastUpdated', operator: Operator.CONTAINS, value: instant }] });
    await expectMatcherAnswer({ resourceType: 'Communication', filters: [{ code: '_lastUpdated', operator: Operator.EQUALS, value: '' }] });
  });

  test('a chained search is refused as not supported, an unknown parameter as unknown', async () => {
    await expect(repository.search(parseSearchRequest('Communication?subject:Patient.name=x'))).rejects.toThrow('Chained search is not supported');
    await expect(repository.search(parseSearchRequest('Communication?_has:Observation:subject:status=final'))).rejects.toThrow('Chained search is not supported');
    await expect(repository.search(parseSearchRequest('Communication?nope=x'))).rejects.toThrow('Unknown search parameter: nope');
  });
});
