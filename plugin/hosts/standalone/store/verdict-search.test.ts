/**
 * A search read in order keeps what its condition (the caller's AccessPolicy, a `:not`) said of each version
 * (verdict-cache.ts): a page read again, as a conversation's history is at every turn, checks only the versions it
 * has not checked before, and an answer never comes from a verdict about another version or another policy.
 */
import { jest } from '@jest/globals';
import { parseSearchRequest } from '@medplum/core';
import type { Observation } from '@medplum/fhirtypes';
import { inMemoryStoreForEachTest, reading } from '../../../../test/support/store-readings.ts';
import { ResourceStore } from './resource-store.ts';
import type { PolicyAlternative } from './search-plan.ts';

function policy(criteria: string): PolicyAlternative[] {
  return [{ filters: parseSearchRequest(criteria).filters ?? [] }];
}

const FINAL_OF_P1 = policy('Observation?subject=Patient/p1&status=final');
const OF_P1 = policy('Observation?subject=Patient/p1');
const OF_P2 = policy('Observation?subject=Patient/p2');
const NEWEST = parseSearchRequest('Observation?patient=Patient/p1&_sort=-date&_count=10');

const store = inMemoryStoreForEachTest();

/** How SQLite read `resources` in each statement that checked versions without a verdict. */
/** The query plans of the check statements of the last `checkedRows`. */
const checkPlans: string[] = [];

/** The rows the search's condition was checked on in SQL, one list per statement that checked some. */
async function checkedRows(search: () => Promise<unknown>): Promise<number[][]> {
  const checked: number[][] = [];
  checkPlans.length = 0;
  const { queryAll, queryArrays } = ResourceStore.prototype;
  // A slice's and a check's rows are arrays: the candidate's pk first.
  jest.spyOn(ResourceStore.prototype, 'queryArrays').mockImplementation(function (this: ResourceStore, sql, params) {
    if (sql.includes('EXISTS')) {
      // The checks of a slice without verdicts run in the slice's own statement: all its candidates are checked.
      const candidates = queryArrays.call(this, sql, params);
      const isCheck = sql.startsWith('SELECT r.pk FROM json_each(?)');
      if (isCheck) {
        const plan = queryAll.call(this, `EXPLAIN QUERY PLAN ${sql}`, params);
        checkPlans.push(...plan.map((step) => String(step.detail)).filter((detail) => / r\b/.test(detail) && !detail.includes('SUBQUERY')));
      }
      checked.push(isCheck ? (JSON.parse(String(params[0])) as number[]) : candidates.map((row) => Number(row[0])));
      return candidates;
    }
    return queryArrays.call(this, sql, params);
  });
  await search();
  jest.restoreAllMocks();
  return checked;
}

const dates = async (alternatives: readonly PolicyAlternative[]): Promise<(string | undefined)[]> =>
  ((await store().searchWithinPolicy(NEWEST, alternatives)).entry ?? []).map((entry) => (entry.resource as Observation).effectiveDateTime);

test("a page read again checks only the versions it has not checked before: a new reading, not the page's others", async () => {
  for (let hour = 0; hour < 30; hour++) await store().createResource(reading('Patient/p1', hour));
  const first = await checkedRows(() => dates(FINAL_OF_P1));
  expect(first.flat()).toHaveLength(11); // the page and one more
  const again = await checkedRows(() => dates(FINAL_OF_P1));
  expect(again.flat()).toEqual([]);
  const added = await store().createResource(reading('Patient/p1', 30));
  let answer: (string | undefined)[] = [];
  const next = await checkedRows(async () => {
    answer = await dates(FINAL_OF_P1);
  });
  expect(next.flat()).toHaveLength(1);
  expect(answer[0]).toBe(added.effectiveDateTime);
  expect(answer).toHaveLength(10);
  // Each version checked is read by its row, never by a scan of the project's records of the type.
  expect(checkPlans.length).toBeGreaterThan(0);
  for (const step of checkPlans) expect(step).toMatch(/^SEARCH r USING INTEGER PRIMARY KEY/);
});

test('a record changed so that the policy no longer allows it leaves the answer, though its row was allowed before', async () => {
  const readings = [];
  for (let hour = 0; hour < 12; hour++) readings.push(await store().createResource(reading('Patient/p1', hour)));
  expect(await dates(FINAL_OF_P1)).toHaveLength(10);
  const newest = readings.at(-1) as Observation & { id: string };
  // Still the patient's (a candidate of the same lookup), no longer `final`: the policy's own condition fails.
  await store().updateResource({ ...newest, status: 'entered-in-error' });
  const answer = await dates(FINAL_OF_P1);
  expect(answer).not.toContain(newest.effectiveDateTime);
  expect(answer).toHaveLength(10);
  // And back: the version after is allowed again.
  const current = await store().readResource<Observation>('Observation', newest.id);
  await store().updateResource({ ...current, status: 'final' });
  expect((await dates(FINAL_OF_P1))[0]).toBe(newest.effectiveDateTime);
});

test("a caller whose policy allows another patient gets nothing from verdicts given under another caller's", async () => {
  for (let hour = 0; hour < 12; hour++) await store().createResource(reading('Patient/p1', hour));
  // The same condition but for its parameter: the patient.
  expect(await dates(OF_P1)).toHaveLength(10);
  expect(await dates(OF_P2)).toEqual([]);
});

test('a deleted record leaves the answer at once', async () => {
  const readings = [];
  for (let hour = 0; hour < 12; hour++) readings.push(await store().createResource(reading('Patient/p1', hour)));
  expect(await dates(FINAL_OF_P1)).toHaveLength(10);
  const newest = readings.at(-1) as Observation & { id: string };
  await store().deleteResource('Observation', newest.id);
  const answer = await dates(FINAL_OF_P1);
  expect(answer).not.toContain(newest.effectiveDateTime);
  expect(answer).toHaveLength(10);
});
