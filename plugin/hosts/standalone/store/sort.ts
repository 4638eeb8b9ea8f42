/**
 * Search sort rules: as an SQL ORDER BY when every rule reads a column or the search index, else as a comparator
 * over values computed from the search parameter's expression. Both orders agree: a resource's key is its
 * smallest value ascending and its largest descending; resources without a value come last ascending and first
 * descending (PostgreSQL's default, as on Medplum's server); ties keep insertion order.
 */
import {
  OperationOutcomeError,
  badRequest,
  convertToSearchableDates,
  convertToSearchableNumbers,
  convertToSearchableQuantities,
  convertToSearchableReferences,
  convertToSearchableStrings,
  convertToSearchableTokens,
  evalFhirPathTyped,
  getParsedExpressionForResourceType,
  getSearchParameter,
  toTypedValue,
  type FhirPathAtom,
  type SortRule,
  type TypedValue,
} from '@medplum/core';
import type { Resource, SearchParameter } from '@medplum/fhirtypes';
import type { IndexedParameter } from './search-index.ts';
import type { SqlFragment } from './search-plan.ts';

/** A sort rule with its search parameter. */
export interface ResolvedSortRule {
  readonly code: string;
  readonly descending: boolean;
  readonly parameter: SearchParameter;
}

type SortKey = string | number | undefined;

/** Columns of `resources` holding a search parameter's value exactly as the comparator sees it. */
const COLUMN_KEYS: Readonly<Record<string, string>> = {
  _id: 'r.id',
  _lastUpdated: 'r.last_updated',
  _project: 'r.project',
};

/** Without `_sort`, results come in order of last update, oldest first (an index order, so no sort step). */
const DEFAULT_ORDER: SqlFragment = { sql: 'r.last_updated, r.pk', params: [] };

const atoms = new Map<string, FhirPathAtom>();

/** Checks that every rule names a search parameter of the type; throws badRequest otherwise. */
export function resolveSortRules(resourceType: string, sortRules: readonly SortRule[] | undefined): ResolvedSortRule[] {
  return (sortRules ?? []).map((rule) => {
    const parameter = getSearchParameter(resourceType, rule.code);
    if (!parameter?.expression) {
      throw new OperationOutcomeError(badRequest(`Unknown search parameter: ${rule.code}`));
    }
    return { code: rule.code, descending: Boolean(rule.descending), parameter };
  });
}

/**
 * The ORDER BY for the rules, or undefined when some rule reads a parameter the index does not hold. With
 * `pkColumn` (a column holding resource pks, e.g. of index rows) only rules the index answers are accepted, since
 * the columns of `resources` are not at hand; the order is the same as over `r.pk`.
 */
export function sqlOrderBy(
  rules: readonly ResolvedSortRule[],
  indexed: ReadonlyMap<string, IndexedParameter>,
  pkColumn = 'r.pk'
): SqlFragment | undefined {
  if (rules.length === 0) {
    return pkColumn === 'r.pk' ? DEFAULT_ORDER : undefined;
  }
  const terms: string[] = [];
  const params: string[] = [];
  for (const rule of rules) {
    const direction = rule.descending ? 'DESC' : 'ASC';
    const nulls = rule.descending ? 'NULLS FIRST' : 'NULLS LAST';
    const column = COLUMN_KEYS[rule.code];
    if (column) {
      if (pkColumn !== 'r.pk') {
        return undefined;
      }
      // id and last_updated are never NULL; leaving out NULLS lets SQLite read them in index order.
      terms.push(rule.code === '_project' ? `${column} ${direction} ${nulls}` : `${column} ${direction}`);
    } else if (indexed.has(rule.code)) {
      const aggregate = rule.descending ? 'MAX' : 'MIN';
      terms.push(
        `(SELECT ${aggregate}(value) FROM search_index WHERE resource_pk = ${pkColumn} AND param = ?) ${direction} ${nulls}`
      );
      params.push(rule.code);
    } else {
      return undefined;
    }
  }
  terms.push(rules[0].descending ? `${pkColumn} DESC` : pkColumn);
  return { sql: terms.join(', '), params };
}

/**
 * Sorts resources by the rules (stable). For the same tie order as {@link sqlOrderBy}, pass them in insertion
 * order, reversed when the first rule is descending.
 */
export function sortResources<T extends Resource>(resources: readonly T[], rules: readonly ResolvedSortRule[]): T[] {
  if (rules.length === 0) {
    return [...resources];
  }
  const keyed = resources.map((resource) => ({ resource, keys: rules.map((rule) => sortKey(resource, rule)) }));
  keyed.sort((left, right) => {
    for (let index = 0; index < rules.length; index++) {
      const order = compareKeys(left.keys[index], right.keys[index]);
      if (order !== 0) {
        return rules[index].descending ? -order : order;
      }
    }
    return 0;
  });
  return keyed.map((entry) => entry.resource);
}

function compareKeys(left: SortKey, right: SortKey): number {
  if (left === right) {
    return 0;
  }
  if (left === undefined) {
    return 1;
  }
  if (right === undefined) {
    return -1;
  }
  return left < right ? -1 : 1;
}

function sortKey(resource: Resource, rule: ResolvedSortRule): SortKey {
  switch (rule.code) {
    case '_id':
      return resource.id;
    case '_lastUpdated':
      return resource.meta?.lastUpdated;
    case '_project':
      return resource.meta?.project?.toLowerCase();
  }
  const values = keyValues(rule.parameter, resource);
  let key: string | number | undefined;
  for (const value of values) {
    if (key === undefined || (rule.descending ? value > key : value < key)) {
      key = value;
    }
  }
  return key;
}

function keyValues(parameter: SearchParameter, resource: Resource): (string | number)[] {
  const typedValues = evaluate(parameter, resource);
  switch (parameter.type) {
    case 'date':
      return convertToSearchableDates(typedValues).map((period) => period.start ?? '0000');
    case 'token':
      return convertToSearchableTokens(typedValues).map((token) => (token.value ?? '').toLowerCase());
    case 'reference':
      return convertToSearchableReferences(typedValues);
    case 'number':
      return convertToSearchableNumbers(typedValues)
        .map(([low]) => low)
        .filter((value): value is number => value !== undefined);
    case 'quantity':
      return convertToSearchableQuantities(typedValues)
        .map((quantity) => quantity.value)
        .filter((value): value is number => value !== undefined);
    default:
      return convertToSearchableStrings(typedValues).map((value) => value.toLowerCase());
  }
}

function evaluate(parameter: SearchParameter, resource: Resource): TypedValue[] {
  const cacheKey = `${resource.resourceType}\0${parameter.expression}`;
  let atom = atoms.get(cacheKey);
  if (!atom) {
    atom = getParsedExpressionForResourceType(resource.resourceType, parameter.expression as string);
    atoms.set(cacheKey, atom);
  }
  try {
    return evalFhirPathTyped(atom, [toTypedValue(resource)]);
  } catch {
    return [];
  }
}
