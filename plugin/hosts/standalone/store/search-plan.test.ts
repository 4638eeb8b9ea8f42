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
function slicePlan(source: CandidateSource, searchPlan: SearchPlan, cursor = true, where = searchPlan.where): string[] {
  const inner = source.slice(cursor ? { key: 'k', pk: 1 } : undefined, 64);
  const sql = `SELECT c.pk, (${where.sql}) AS ok FROM (${inner.sql}) c CROSS JOIN resources r WHERE r.pk = c.pk ORDER BY c.cursor_key, c.pk`;
  return database
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...where.params, ...inner.params)
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
    // A token of no value (`|`) matches nothing, and negated everything: decided without the matcher either way.
    expect(plan('Communication?category=|').matchesNothing).toBe(true);
    const everything = plan('Communication?category:not=|');
    expect(everything.matchesNothing).toBe(false);
    expect(everything.exact).toBe(true);
    // A parameter the index does not hold is left to the matcher.
    expect(plan('Communication?received:missing=true').exact).toBe(false);
  });

  test('a date the index holds is decided in SQL, and so are _lastUpdated, _id and _project from the record itself', () => {
    expect(plan('Communication?sent=gt2024-01-01').exact).toBe(true);
    expect(plan('Communication?_lastUpdated=gt2024-01-01').exact).toBe(true);
    expect(plan('Communication?_id=abc').exact).toBe(true);
    expect(plan('Communication?_project=x').exact).toBe(true);
    // Negated, they are left to the matcher.
    expect(plan('Communication?_lastUpdated=ne2024-01-01').exact).toBe(false);
    // A project with a system is none: nothing to read.
    expect(plan('Communication?_project=sys|x').matchesNothing).toBe(true);
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

describe('which lookup a search reads', () => {
  test('the most selective filter drives, wherever the request names it: an id, then a reference or identifier, then a code', () => {
    expect(plan('Observation?_id=abc&patient=Patient/p1').driver).toMatchObject({ kind: 'id', values: ['abc'] });
    expect(plan('Observation?patient=Patient/p1&_id=abc').driver).toMatchObject({ kind: 'id', values: ['abc'] });
    expect(plan('Observation?code=8867-4&subject=Patient/p1').driver).toMatchObject({ param: 'subject' });
    expect(plan('Observation?code=8867-4&identifier=urn:obs|o1').driver).toMatchObject({ param: 'identifier' });
    expect(plan('Observation?code=8867-4&_compartment=Patient/p1').driver).toMatchObject({ kind: 'index', param: 'code' });
  });

  test('a lookup as selective as the driver is its peer, one less selective is not', () => {
    const searchPlan = plan('Observation?subject=Patient/p1&code=8867-4&performer=Practitioner/a');
    expect(searchPlan.driver).toMatchObject({ param: 'subject' });
    expect(searchPlan.peers?.map((lookup) => lookup.param)).toEqual(['performer']);
    expect(plan('Observation?subject=Patient/p1&code=8867-4').peers).toEqual([]);
  });

  test("a compartment rule's search reads the compartment, or the rule's own lookup when it has one", () => {
    const inCompartment = plan('Observation?status=final', [{ filters: [], compartment: { reference: 'Patient/p1' } }]);
    expect(inCompartment.exact).toBe(true);
    expect(inCompartment.policyDrivers).toEqual([expect.objectContaining({ param: '_compartment', values: ['Patient/p1'] })]);
    const withCriteria = plan('Observation?status=final', [{ filters: parseSearchRequest('Observation?performer=Practitioner/a').filters ?? [], compartment: { reference: 'Patient/p1' } }]);
    expect(withCriteria.policyDrivers).toEqual([expect.objectContaining({ param: 'performer', values: ['Practitioner/a'] })]);
  });

  test('a compartment rule without a reference, or while the index holds no compartments, is left to the matcher', () => {
    expect(plan('Observation?status=final', [{ filters: [], compartment: {} }]).exact).toBe(false);
    const unindexed = planSearch('Observation', [], [{ filters: [], compartment: { reference: 'Patient/p1' } }], new Map());
    expect(unindexed.exact).toBe(false);
    expect(unindexed.matchesNothing).toBe(false);
  });

  test('a filter the matcher never matches (a quantity) finds nothing without reading a record', () => {
    expect(plan('Observation?value-quantity=5').matchesNothing).toBe(true);
    expect(plan('Observation?status=final', [{ filters: parseSearchRequest('Observation?value-quantity=5').filters ?? [] }]).matchesNothing).toBe(true);
  });
});

describe('slice query plans', () => {
  test('a sorted lookup is one index range read from where the last slice ended, each resource by its pk', () => {
    const steps = slicePlan(indexRange('Observation', 'patient>date', 'Patient/p1', true), plan('Observation?patient=Patient/p1', careTeam));
    expect(steps.some((step) => /SEARCH search_index USING PRIMARY KEY \(type_code=\? AND param=\? AND value=\? AND \(extra,resource_pk\)<\(\?,\?\)\)/.test(step))).toBe(true);
    expect(steps.some((step) => /SEARCH r USING INTEGER PRIMARY KEY/.test(step))).toBe(true);
    expect(steps.some((step) => /^SCAN (r|resources|search_index)\b/.test(step))).toBe(false);
  });

  test("a conversation's history page read from the conversation's own rows does not look the conversation up again for each row", () => {
    const history = plan('Communication?part-of=Communication/root&category:not=urn:fhirgate:category|side-request&_sort=-sent');
    const source = indexRange('Communication', 'part-of>sent', 'Communication/root', true);
    const probes = (steps: string[]): number => steps.filter((step) => /SEARCH search_index\b/.test(step)).length;
    const everyFilter = slicePlan(source, history);
    const fromItsRows = slicePlan(source, history, true, history.whereFromDriver);
    // The slice's own range read, and one probe a row for each filter it must still check: the category only.
    expect(probes(everyFilter)).toBe(3);
    expect(probes(fromItsRows)).toBe(2);
    expect(history.whereFromDriver?.params).not.toContain('Communication/root');
    expect(history.whereFromDriver?.params).toContain('side-request');
  });

  test("a token's rows do not decide its filter (they hold the code, not the system): every filter is checked on its candidates", () => {
    expect(plan('Observation?code=http://loinc.org|8867-4').whereFromDriver).toBeUndefined();
    expect(plan('Communication?identifier=turn-1').whereFromDriver).toBeUndefined();
    // An id's rows do: only the type and the other filters are left.
    expect(plan('Communication?_id=a,b&status=completed').whereFromDriver?.params).toEqual(['Communication', 'status', 'completed']);
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
