/**
 * The store's search narrowed by an AccessPolicy (`searchWithinPolicy`): what a chat turn reads of a large chart costs
 * about one page, a criterion the index cannot decide is left to Medplum's matcher without holding the event loop,
 * and `:missing` and `_id` decide as the matcher does. That the answers equal the matcher's for every policy is
 * shown by policy-narrowed-search.test.ts.
 */
import { parseSearchRequest } from '@medplum/core';
import type { Observation, Patient } from '@medplum/fhirtypes';
import { inMemoryStoreForEachTest, reading } from '../../../../test/support/store-readings.ts';
import { readsOf, rowsRead } from '../../../../test/support/store-rows-read.ts';
import type { PolicyAlternative } from './search-plan.ts';
import type { SqliteRepository } from './sqlite-repository.ts';

const PATIENT = 'Patient/p1';
/** As the care-team policy gives them for two patients (fixtures/demo-project.json). */
const CARE_TEAM: PolicyAlternative[] = [
  { filters: parseSearchRequest('Observation?subject=Patient/p1').filters ?? [] },
  { filters: parseSearchRequest('Observation?subject=Patient/p2').filters ?? [] },
];

const store = inMemoryStoreForEachTest();

async function createAll(observations: readonly Observation[]): Promise<void> {
  // Concurrent writes share commits: a few hundred at a time.
  for (let start = 0; start < observations.length; start += 250) {
    await Promise.all(observations.slice(start, start + 250).map((observation) => store().createResource(observation)));
  }
}


describe('a search narrowed by an AccessPolicy', () => {
  test("a page of a patient's newest Observations reads about one page, however many the chart and the project hold", async () => {
    const chart = Array.from({ length: 1500 }, (_, hour) => reading(PATIENT, hour));
    const others = Array.from({ length: 1500 }, (_, hour) => reading(hour % 2 === 0 ? 'Patient/p2' : undefined, hour));
    await createAll([...chart, ...others]);
    let bundle: Awaited<ReturnType<SqliteRepository['searchWithinPolicy']>> | undefined;
    const rows = await rowsRead(async () => {
      bundle = await store().searchWithinPolicy(parseSearchRequest(`Observation?patient=${PATIENT}&_sort=-date&_count=10&_project=project-a`), CARE_TEAM);
    });
    const dates = bundle?.entry?.map((entry) => (entry.resource as Observation).effectiveDateTime);
    expect(dates).toEqual(chart.slice(-10).reverse().map((observation) => observation.effectiveDateTime));
    // One slice of index rows (the page and one more), the page's resources, a few lookups.
    expect(rows).toBeLessThan(40);
  });

  test("a patient the policy does not allow gets nothing: none of their records is loaded, and the others' charts are not read", async () => {
    // Patient/p9 has a chart (every third reading, 200): only the policy keeps it out of the answer.
    await createAll(Array.from({ length: 600 }, (_, hour) => reading(hour % 3 === 0 ? 'Patient/p9' : PATIENT, hour)));
    const search = parseSearchRequest('Observation?patient=Patient/p9&_sort=-date&_count=10');
    expect((await store().search(search)).entry).toHaveLength(10);
    const reads = await readsOf(async () => {
      const bundle = await store().searchWithinPolicy(search, CARE_TEAM);
      expect(bundle.entry).toBeUndefined();
    });
    expect(reads.resources).toBe(0);
    // At most p9's own index rows (the policy is checked in SQL on each), never the 400 of Patient/p1's chart.
    expect(reads.rows).toBeLessThanOrEqual(200);
  });

  test('a criterion the index cannot decide is left to the matcher, a slice at a time: other work runs before the answer', async () => {
    await createAll(Array.from({ length: 3000 }, (_, hour) => ({ ...reading(PATIENT, hour), valueString: hour === 2999 ? 'flagged' : 'normal' })));
    // value-string is not indexed: every candidate's content goes through the matcher.
    const policy: PolicyAlternative[] = [{ filters: parseSearchRequest('Observation?value-string=flagged').filters ?? [] }];
    const order: string[] = [];
    const search = store().searchWithinPolicy(parseSearchRequest('Observation?_count=5&_total=accurate'), policy).then((bundle) => {
      order.push('search');
      return bundle;
    });
    setImmediate(() => order.push('other work'));
    const bundle = await search;
    expect(bundle.total).toBe(1);
    expect((bundle.entry?.[0]?.resource as Observation).valueString).toBe('flagged');
    expect(order).toEqual(['other work', 'search']);
  });

  test(':missing counts a reference without a searchable value (display only) as present, as the matcher does', async () => {
    await store().createResource({ ...reading(undefined, 1), subject: { display: 'a visitor' } });
    await store().createResource(reading(undefined, 2));
    await store().createResource(reading(PATIENT, 3));
    const hours = async (query: string): Promise<(string | undefined)[]> =>
      ((await store().search(parseSearchRequest(query))).entry ?? []).map((entry) => (entry.resource as Observation).effectiveDateTime?.slice(11, 13));
    expect(await hours('Observation?subject:missing=true')).toEqual(['02']);
    expect(await hours('Observation?subject:missing=false')).toEqual(['01', '03']);
    expect(await hours('Observation?subject:present=true&subject:not=Patient/p1')).toEqual(['01']);
  });

  test('_id matches whatever the case of the id, as the matcher does', async () => {
    await store().createResource<Patient>({ resourceType: 'Patient', id: 'MixedCase-1' }, { assignedId: true });
    for (const id of ['MixedCase-1', 'mixedcase-1', 'MIXEDCASE-1']) {
      expect((await store().search(parseSearchRequest(`Patient?_id=${id}`))).entry?.map((entry) => entry.resource?.id)).toEqual(['MixedCase-1']);
    }
  });
});

/** Criteria as an AccessPolicy rule gives them, each one alternative (compiled-access-policy.ts). */
function criteria(...queries: string[]): PolicyAlternative[] {
  return queries.map((query) => ({ filters: parseSearchRequest(query).filters ?? [] }));
}

describe("what a policy's alternatives let through", () => {
  const LOINC = 'http://loinc.org';
  /** Observations named for what tells them apart, each in its patient's compartment. */
  const records: Observation[] = [
    { id: 'p1-final-loinc', subject: 'Patient/p1', status: 'final', system: LOINC, performer: 'Practitioner/a', text: 'flagged' },
    { id: 'p1-preliminary-other-system', subject: 'Patient/p1', status: 'preliminary', system: 'http://example.org/codes', performer: 'Practitioner/b', text: 'normal' },
    { id: 'p2-final-loinc', subject: 'Patient/p2', status: 'final', system: LOINC, performer: 'Practitioner/a', text: 'normal' },
    { id: 'p3-final-loinc', subject: 'Patient/p3', status: 'final', system: LOINC, performer: 'Practitioner/b', text: 'flagged' },
  ].map(({ id, subject, status, system, performer, text }) => ({
    resourceType: 'Observation',
    id,
    status: status as Observation['status'],
    code: { coding: [{ system, code: '8867-4' }] },
    subject: { reference: subject },
    performer: [{ reference: performer }],
    valueString: text,
    meta: { project: 'project-a', compartment: [{ reference: subject }] },
  }));

  beforeEach(async () => {
    for (const record of records) {
      await store().createResource(record, { assignedId: true });
    }
  });

  /** The ids a caller whose policy gives `alternatives` finds with `query`, in order. */
  async function seen(query: string, alternatives: readonly PolicyAlternative[]): Promise<string[]> {
    const bundle = await store().searchWithinPolicy(parseSearchRequest(query), alternatives);
    return (bundle.entry ?? []).map((entry) => entry.resource?.id as string).sort();
  }

  test('a rule with a reference criterion and another: a record must meet both', async () => {
    expect(await seen('Observation?', criteria('Observation?subject=Patient/p1&status=final'))).toEqual(['p1-final-loinc']);
    expect(await seen('Observation?', criteria('Observation?status=final&patient=Patient/p1'))).toEqual(['p1-final-loinc']);
  });

  test('a rule with a reference criterion and a compartment: a record must be in the compartment too', async () => {
    const rule: PolicyAlternative = { filters: parseSearchRequest('Observation?performer=Practitioner/a').filters ?? [], compartment: { reference: 'Patient/p1' } };
    expect(await seen('Observation?', [rule])).toEqual(['p1-final-loinc']);
    expect(await seen('Observation?', [...criteria('Observation?subject=Patient/p3'), rule])).toEqual(['p1-final-loinc', 'p3-final-loinc']);
  });

  test('a rule of a compartment alone lets through the records in it, and no other', async () => {
    expect(await seen('Observation?', [{ filters: [], compartment: { reference: 'Patient/p2' } }])).toEqual(['p2-final-loinc']);
    expect(await seen('Observation?status=final', [{ filters: [], compartment: { reference: 'Patient/p1' } }])).toEqual(['p1-final-loinc']);
  });

  test('a code criterion with its system lets through that code of that system only', async () => {
    expect(await seen('Observation?', criteria(`Observation?code=${LOINC}|8867-4`))).toEqual(['p1-final-loinc', 'p2-final-loinc', 'p3-final-loinc']);
    expect(await seen('Observation?', criteria('Observation?code=http://example.org/codes|8867-4', 'Observation?subject=Patient/p3'))).toEqual([
      'p1-preliminary-other-system',
      'p3-final-loinc',
    ]);
  });

  test('a rule the index checks but cannot look up (a negation) beside one it looks up: each lets its own records through', async () => {
    expect(await seen('Observation?', criteria('Observation?subject=Patient/p2', 'Observation?status:not=final'))).toEqual(['p1-preliminary-other-system', 'p2-final-loinc']);
    expect(await seen('Observation?_sort=-_lastUpdated', criteria('Observation?performer:missing=false&subject:not=Patient/p1', 'Observation?subject=Patient/p1'))).toEqual([
      'p1-final-loinc',
      'p1-preliminary-other-system',
      'p2-final-loinc',
      'p3-final-loinc',
    ]);
  });

  test('a rule with a criterion the type does not have lets nothing through, whatever its other criteria', async () => {
    expect(await seen('Observation?', criteria('Observation?status=final&no-such=1'))).toEqual([]);
    expect(await seen('Observation?', criteria('Observation?subject=Patient/p1&no-such=1', 'Observation?subject=Patient/p2'))).toEqual(['p2-final-loinc']);
  });

  test('a criterion the index cannot decide holds with the others of its rule, and beside rules the index decides', async () => {
    expect(await seen('Observation?', criteria('Observation?status=final&value-string=flagged'))).toEqual(['p1-final-loinc', 'p3-final-loinc']);
    expect(await seen('Observation?', criteria('Observation?subject=Patient/p2', 'Observation?value-string=flagged'))).toEqual([
      'p1-final-loinc',
      'p2-final-loinc',
      'p3-final-loinc',
    ]);
    expect(await seen('Observation?', criteria('Observation?performer=Practitioner/b&status=preliminary', 'Observation?value-string=flagged&status=final'))).toEqual([
      'p1-final-loinc',
      'p1-preliminary-other-system',
      'p3-final-loinc',
    ]);
  });

  test("a search's own filters hold under any policy: one the index cannot decide, one no value can meet", async () => {
    const everyone = criteria('Observation?subject=Patient/p1,Patient/p2,Patient/p3');
    expect(await seen('Observation?status=final&value-string=flagged', everyone)).toEqual(['p1-final-loinc', 'p3-final-loinc']);
    expect((await store().search(parseSearchRequest('Observation?status=final&value-string=flagged'))).entry?.map((entry) => entry.resource?.id).sort()).toEqual([
      'p1-final-loinc',
      'p3-final-loinc',
    ]);
    expect(await seen('Observation?status=final&code=|', everyone)).toEqual([]);
    expect((await store().search(parseSearchRequest('Observation?status=final&code=|'))).entry).toBeUndefined();
  });
});
