import type { Observation, Patient, Resource, RiskAssessment } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../fhir-definitions.ts';
import { SearchIndexSpec } from './search-index.ts';
import { resolveSortRules, sortResources, sqlSortKey } from './sort.ts';

beforeAll(() => {
  loadFhirDefinitions();
});

const patients: Patient[] = [
  { resourceType: 'Patient', id: 'b', name: [{ family: 'bell' }], birthDate: '1990-05-01' },
  { resourceType: 'Patient', id: 'none' },
  { resourceType: 'Patient', id: 'a', name: [{ family: 'Adams' }, { family: 'Zed' }], birthDate: '1980' },
  { resourceType: 'Patient', id: 'c', name: [{ family: 'Curie' }], birthDate: '1990-05-01' },
];

function sortedIds(resources: Resource[], sort: string): (string | undefined)[] {
  const rules = resolveSortRules(
    resources[0].resourceType,
    sort.split(',').map((code) => ({ code: code.replace(/^-/, ''), descending: code.startsWith('-') }))
  );
  return sortResources(resources, rules).map((resource) => resource.id);
}

describe('sortResources', () => {
  test('strings compare case-insensitively, by the smallest value ascending and the largest descending', () => {
    expect(sortedIds(patients, 'family')).toEqual(['a', 'b', 'c', 'none']);
    expect(sortedIds(patients, '-family')).toEqual(['none', 'a', 'c', 'b']);
  });

  test('dates compare as instants; ties keep the given order; a second rule breaks them', () => {
    expect(sortedIds(patients, 'birthdate')).toEqual(['a', 'b', 'c', 'none']);
    expect(sortedIds(patients, 'birthdate,-family')).toEqual(['a', 'c', 'b', 'none']);
  });

  test('numbers and quantities compare numerically', () => {
    const risks: RiskAssessment[] = [9, 10, 2.5].map((probability, index) => ({
      resourceType: 'RiskAssessment',
      id: `r${index}`,
      status: 'final',
      subject: { reference: 'Patient/a' },
      prediction: [{ probabilityDecimal: probability }],
    }));
    expect(sortedIds(risks, 'probability')).toEqual(['r2', 'r0', 'r1']);
    const observations: Observation[] = [100, 20, 3].map((value, index) => ({
      resourceType: 'Observation',
      id: `o${index}`,
      status: 'final',
      code: { text: 'weight' },
      valueQuantity: { value, unit: 'kg' },
    }));
    expect(sortedIds(observations, '-value-quantity')).toEqual(['o0', 'o1', 'o2']);
  });
});

describe('sqlSortKey', () => {
  test('indexed parameters and columns are read in SQL (the largest value descending, the smallest ascending); others are left to sortKey', () => {
    const indexed = new SearchIndexSpec().parametersFor('Communication');
    const [sent, id] = resolveSortRules('Communication', [{ code: 'sent', descending: true }, { code: '_id' }]).map((rule) => sqlSortKey(rule, indexed));
    expect(sent).toEqual({ sql: '(SELECT MAX(value) FROM search_index WHERE resource_pk = r.pk AND param = (SELECT code FROM search_params WHERE name = ?))', params: ['sent'] });
    expect(id).toEqual({ sql: 'r.id', params: [] });
    expect(sqlSortKey(resolveSortRules('Communication', [{ code: 'sent' }])[0], indexed)?.sql).toContain('MIN(value)');
    expect(sqlSortKey(resolveSortRules('Communication', [{ code: 'received' }])[0], indexed)).toBeUndefined();
  });

  test('unknown sort parameters are a 400', () => {
    expect(() => resolveSortRules('Communication', [{ code: 'nope' }])).toThrow('Unknown search parameter: nope');
  });
});
