/**
 * Search sort rules: each rule's key read in SQL when it is a column or an indexed parameter, else computed from
 * the search parameter's expression. Both agree: a resource's key is its smallest value ascending and its largest
 * descending; resources without a value come last ascending and first descending (PostgreSQL's default, as on
 * Medplum's server); ties keep insertion order (the pk: ascending, or descending when the first rule is).
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
import { PARAM_CODE_OF_NAME } from './schema.ts';
import type { IndexedParameter } from './search-index.ts';
import type { SqlFragment } from './search-plan.ts';

/** A sort rule with its search parameter. */
export interface ResolvedSortRule {
  readonly code: string;
  readonly descending: boolean;
  readonly parameter: SearchParameter;
}

/** One rule's key of a resource; undefined when the resource has no value. */
export type SortKey = string | number | undefined;

/** Columns of `resources` holding a search parameter's value exactly as the comparator sees it. */
const COLUMN_KEYS: Readonly<Record<string, string>> = {
  _id: 'r.id',
  _lastUpdated: 'r.last_updated',
  _project: 'r.project',
};

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
 * The SQL expression of a rule's key over `resources r` (NULL when the resource has no value), or undefined when
 * the rule reads a parameter the index does not hold.
 */
export function sqlSortKey(rule: ResolvedSortRule, indexed: ReadonlyMap<string, IndexedParameter>): SqlFragment | undefined {
  const column = COLUMN_KEYS[rule.code];
  if (column) {
    return { sql: column, params: [] };
  }
  const parameter = indexed.get(rule.code);
  if (!parameter) {
    return undefined;
  }
  return { sql: `(SELECT ${rule.descending ? 'MAX' : 'MIN'}(value) FROM search_index WHERE resource_pk = r.pk AND param = ${PARAM_CODE_OF_NAME})`, params: [parameter.rowParam] };
}

/**
 * Sorts resources by the rules (stable). For the tie order of the store, pass them in insertion order, reversed
 * when the first rule is descending.
 */
export function sortResources<T extends Resource>(resources: readonly T[], rules: readonly ResolvedSortRule[]): T[] {
  if (rules.length === 0) {
    return [...resources];
  }
  const keyed = resources.map((resource) => ({ resource, keys: rules.map((rule) => sortKey(resource, rule)) }));
  keyed.sort((left, right) => compareSortKeys(left.keys, right.keys, rules));
  return keyed.map((entry) => entry.resource);
}

/** Compares two resources' keys rule by rule (0 when every rule ties). */
export function compareSortKeys(left: readonly SortKey[], right: readonly SortKey[], rules: readonly { readonly descending: boolean }[]): number {
  for (let index = 0; index < rules.length; index++) {
    const order = compareKeys(left[index], right[index]);
    if (order !== 0) {
      return rules[index].descending ? -order : order;
    }
  }
  return 0;
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

/** A resource's key for one rule, computed from its content. */
export function sortKey(resource: Resource, rule: ResolvedSortRule): SortKey {
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
