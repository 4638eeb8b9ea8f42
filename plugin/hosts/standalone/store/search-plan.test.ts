import { parseSearchRequest } from '@medplum/core';
import type { DatabaseSync } from 'node:sqlite';
import { loadFhirDefinitions } from '../fhir-definitions.ts';
import { indexRange, typeScan, type CandidateSource } from './candidate-sources.ts';
import { openStoreDatabase } from './schema.ts';
import { SearchIndexSpec } from './search-index.ts';
import { planSearch, type PolicyAlternative, type SearchPlan } from './search-plan.ts';

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

function plan(query: string, alternatives?: readonly PolicyAlternative[]): SearchPlan {
  const request = parseSearchRequest(query);
  return planSearch(request.resourceType, request.filters ?? [], alternatives, spec.parametersFor(request.resourceType));
}

/** SQLite's plan for one slice of `source` checked against `searchPlan`, as the executor runs it, one line per step. */
function slicePlan(source: CandidateSource, searchPlan: SearchPlan, cursor = true): string[] {
  const inner = source.slice(cursor ? { key: 'k', pk: 1 } : undefined, 64);
  const sql = `SELECT c.pk, (${searchPlan.where.sql}) AS ok FROM (${inner.sql}) c CROSS JOIN resources r WHERE r.pk = c.pk ORDER BY c.cursor_key, c.pk`;
  return database
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...searchPlan.where.params, ...inner.params)
    .map((row) => String(row.detail));
}

/** The policy of a care-team member for two patients, and their own conversations (fixtures/demo-project.json). */
const careTeam: PolicyAlternative[] = [
  { filters: parseSearchRequest('Observation?subject=Patient/p1').filters ?? [] },
  { filters: parseSearchRequest('Observation?subject=Patient/p2').filters ?? [] },
];

describe('search plans', () => {
  test('a chart search under a care-team policy is exact: the patient drives, the policy is one condition for all its patients', () => {
    const searchPlan = plan('Observation?patient=Patient/p1&_project=x', careTeam);
    expect(searchPlan.exact).toBe(true);
    expect(searchPlan.driver).toMatchObject({ kind: 'index', param: 'patient', values: ['Patient/p1'], reference: true });
    expect(searchPlan.policyDrivers?.map((lookup) => lookup.values)).toEqual([['Patient/p1', 'Patient/p2']]);
    expect(searchPlan.project).toBe('x');
    expect(searchPlan.where.sql).toContain('value IN (?, ?)');
  });

  test("a policy's other alternatives stay alternatives: an OR of their conditions", () => {
    const own: PolicyAlternative[] = [
      ...careTeam,
      { filters: parseSearchRequest('Observation?subject:missing=true&performer=Practitioner/a').filters ?? [] },
    ];
    const searchPlan = plan('Observation?status=final', own);
    expect(searchPlan.exact).toBe(true);
    expect(searchPlan.where.sql).toContain(' OR ');
    expect(searchPlan.policyDrivers?.map((lookup) => lookup.param)).toEqual(['subject', 'performer']);
  });

  test(':missing is exact on an indexed parameter, as are :not and ne on references and tokens', () => {
    expect(plan('Communication?subject:missing=true&sender=Practitioner/a').exact).toBe(true);
    expect(plan('Observation?performer:missing=true&device=Device/d').exact).toBe(true);
    expect(plan('Communication?category:not=ai-prompt').exact).toBe(true);
    expect(plan('Communication?subject:not=Patient/p1').exact).toBe(true);
    // A parameter the index does not hold is left to the matcher.
    expect(plan('Communication?received:missing=true').exact).toBe(false);
  });

  test('a policy criterion on a parameter the type does not have matches nothing, as the matcher decides; a request with one is a 400', () => {
    expect(plan('Observation?status=final', [{ filters: parseSearchRequest('Observation?no-such=1').filters ?? [] }]).matchesNothing).toBe(true);
    expect(() => plan('Observation?no-such=1')).toThrow('Unknown search parameter: no-such');
  });

  test('one alternative without conditions lets every resource through: the policy adds no condition', () => {
    const searchPlan = plan('Observation?status=final', [...careTeam, { filters: [] }]);
    expect(searchPlan.exact).toBe(true);
    expect(searchPlan.policyDrivers).toBeUndefined();
    expect(searchPlan.where.params).not.toContain('Patient/p1');
  });
});

describe('slice query plans', () => {
  test('a sorted lookup is one index range read from where the last slice ended, each resource by its pk', () => {
    const steps = slicePlan(indexRange('Observation', 'patient>date', 'Patient/p1', true), plan('Observation?patient=Patient/p1', careTeam));
    expect(steps.some((step) => /SEARCH search_index USING PRIMARY KEY \(type_code=\? AND param=\? AND value=\? AND \(extra,resource_pk\)<\(\?,\?\)\)/.test(step))).toBe(true);
    expect(steps.some((step) => /SEARCH r USING INTEGER PRIMARY KEY/.test(step))).toBe(true);
    expect(steps.some((step) => /^SCAN (r|resources|search_index)\b/.test(step))).toBe(false);
  });

  test("a search without _sort reads the type's resources of the project in order of last update", () => {
    const steps = slicePlan(typeScan('Communication', 'x', false), plan('Communication?_project=x'));
    expect(steps.some((step) => /SEARCH resources USING COVERING INDEX resources_by_project \(resource_type=\? AND project=\? AND last_updated>\?\)/.test(step))).toBe(true);
    expect(steps.some((step) => /^SCAN (r|resources|search_index)\b/.test(step) || /TEMP B-TREE FOR ORDER BY/.test(step))).toBe(false);
  });

  test('_id is looked up without regard to case', () => {
    const steps = database
      .prepare(`EXPLAIN QUERY PLAN SELECT pk FROM resources WHERE resource_type = ? AND lower(id) IN (?, ?)`)
      .all('Patient', 'a', 'b')
      .map((row) => String(row.detail));
    expect(steps.some((step) => /resources_by_lower_id/.test(step))).toBe(true);
  });
});
