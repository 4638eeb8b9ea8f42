import { parseSearchRequest } from '@medplum/core';
import type { DatabaseSync } from 'node:sqlite';
import { loadFhirDefinitions } from '../fhir-definitions.ts';
import { openStoreDatabase } from './schema.ts';
import { SearchIndexSpec } from './search-index.ts';
import { planFilters } from './search-plan.ts';
import { resolveSortRules, sqlOrderBy } from './sort.ts';

let database: DatabaseSync;
let spec: SearchIndexSpec;

beforeAll(() => {
  loadFhirDefinitions();
  spec = new SearchIndexSpec();
});

beforeEach(() => {
  database = openStoreDatabase(':memory:');
});

afterEach(() => {
  database.close();
});

/** SQLite's plan for the page query the executor runs, one line per step. */
function queryPlan(query: string): string[] {
  const request = parseSearchRequest(query);
  const indexed = spec.parametersFor(request.resourceType);
  const plan = planFilters(request.resourceType, request.filters ?? [], indexed);
  const orderBy = sqlOrderBy(resolveSortRules(request.resourceType, request.sortRules), indexed);
  if (!orderBy) {
    throw new Error('expected an SQL order');
  }
  const sql = `SELECT r.pk FROM resources r WHERE ${plan.where.sql} ORDER BY ${orderBy.sql} LIMIT 20`;
  return database
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...plan.where.params, ...orderBy.params)
    .map((row) => String(row.detail));
}

describe('search query plans', () => {
  test('part-of drives through the search index, never scanning resources', () => {
    const steps = queryPlan('Communication?part-of=Communication/x&_sort=sent&_project=p');
    expect(steps.some((step) => /SEARCH r USING INTEGER PRIMARY KEY/.test(step))).toBe(true);
    expect(steps.some((step) => /SEARCH search_index USING PRIMARY KEY \(resource_type=\? AND param=\? AND value=\?\)/.test(step))).toBe(
      true
    );
    expect(steps.some((step) => /^SCAN (r|resources|search_index)\b/.test(step))).toBe(false);
  });

  test('the most selective lookup drives: a reference before a status or category token', () => {
    const steps = queryPlan('Communication?status=completed&category=prompt&part-of=Communication/x');
    const driving = steps.find((step) => /SEARCH search_index USING PRIMARY KEY/.test(step));
    expect(driving).toBeDefined();
    const plan = planFilters(
      'Communication',
      parseSearchRequest('Communication?status=completed&part-of=Communication/x').filters ?? [],
      spec.parametersFor('Communication')
    );
    expect(plan.where.sql).toMatch(/r\.pk IN \(SELECT resource_pk FROM search_index WHERE resource_type = \? AND param = \? AND value IN/);
    expect(plan.where.params).toContain('part-of');
    expect(plan.where.params.indexOf('part-of')).toBeLessThan(plan.where.params.indexOf('status'));
  });

  test('_project with _sort=-_lastUpdated reads the project index in order, without a sort step', () => {
    const steps = queryPlan('Communication?_project=p&_sort=-_lastUpdated');
    expect(steps.some((step) => /SEARCH r USING INDEX resources_by_project \(resource_type=\? AND project=\?\)/.test(step))).toBe(true);
    expect(steps.some((step) => /TEMP B-TREE/.test(step))).toBe(false);
  });

  test('_id is a primary-key lookup', () => {
    const steps = queryPlan('Communication?_id=a,b&part-of=Communication/x');
    expect(steps.some((step) => /SEARCH r USING INDEX resources_by_id \(resource_type=\? AND id=\?\)/.test(step))).toBe(true);
  });
});
