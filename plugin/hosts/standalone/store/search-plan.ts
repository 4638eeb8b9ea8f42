/**
 * Turns the filters of a SearchRequest into an SQL WHERE clause over `resources r`.
 *
 * Each filter the store can answer from a column or from `search_index` becomes a condition that selects exactly
 * the resources `matchesSearchRequest` would accept; any other filter adds no condition, and the plan is then
 * marked inexact (the SQL selects a superset and the caller checks every candidate with the matcher). The most
 * selective index lookup drives the query (`r.pk IN (...)`); the other filters are per-row checks.
 */
import {
  OperationOutcomeError,
  Operator,
  badRequest,
  getSearchParameter,
  splitSearchOnComma,
  toPeriod,
  type Filter,
} from '@medplum/core';
import type { SQLInputValue } from 'node:sqlite';
import type { IndexedParameter } from './search-index.ts';

/** An SQL expression and its bound parameters. */
export interface SqlFragment {
  readonly sql: string;
  readonly params: readonly SQLInputValue[];
}

/** The SQL form of a search's filters. */
export interface FilterPlan {
  /** True when some filter can match no resource, so there is nothing to query. */
  readonly matchesNothing: boolean;
  /** True when `where` selects exactly the matching resources; false when it selects a superset. */
  readonly exact: boolean;
  /** The condition on `resources r` (live resources of the searched type). */
  readonly where: SqlFragment;
  /**
   * When an index lookup drives: the query selecting its candidate pks (column `resource_pk`), and `residual`,
   * the rest of `where`, to check one candidate at a time with `r.pk = ?`.
   */
  readonly driver?: {
    readonly candidates: SqlFragment;
    readonly residual: SqlFragment;
    /** When the lookup is one reference parameter equal to one value: which (for a sorted lookup, search-index.ts). */
    readonly reference?: SingleReference;
  };
}

/** A reference parameter equal to one value. */
export interface SingleReference {
  readonly code: string;
  readonly value: string;
}

interface IndexLookup {
  readonly sql: SqlFragment;
  /** Lower is expected to be more selective. */
  readonly rank: number;
  readonly reference?: SingleReference;
}

interface FilterTranslation {
  readonly exact: boolean;
  readonly matchesNothing?: boolean;
  /** A per-row condition; `columnPrefix` is '+' when the column must not drive the query. */
  readonly condition?: (columnPrefix: string) => SqlFragment;
  readonly lookup?: IndexLookup;
  readonly selectsById?: boolean;
}

const NOT_PUSHED: FilterTranslation = { exact: false };
const MATCHES_NOTHING: FilterTranslation = { exact: true, matchesNothing: true };

const RANK_BY_ID = 0;
const RANK_REFERENCE = 1;
const RANK_TOKEN = 2;
const RANK_COMPARTMENT = 3;
const RANK_DATE = 4;

/** Plans the filters of a search on `resourceType`; throws badRequest for parameters the type does not have. */
export function planFilters(
  resourceType: string,
  filters: readonly Filter[],
  indexed: ReadonlyMap<string, IndexedParameter>
): FilterPlan {
  const translations = filters.map((filter) => translateFilter(resourceType, filter, indexed));
  if (translations.some((translation) => translation.matchesNothing)) {
    return { matchesNothing: true, exact: true, where: { sql: '0', params: [] } };
  }

  const selectsById = translations.some((translation) => translation.selectsById);
  let driver: FilterTranslation | undefined;
  if (!selectsById) {
    for (const translation of translations) {
      if (translation.lookup && (!driver?.lookup || translation.lookup.rank < driver.lookup.rank)) {
        driver = translation;
      }
    }
  }

  // With an index lookup driving, '+' keeps SQLite from scanning a resources index instead.
  const columnPrefix = driver ? '+' : '';
  const residualConditions: string[] = [`${columnPrefix}r.resource_type = ?`, 'r.deleted = 0'];
  const residualParams: SQLInputValue[] = [resourceType];
  for (const translation of translations) {
    if (translation !== driver && translation.condition) {
      const condition = translation.condition(columnPrefix);
      residualConditions.push(condition.sql);
      residualParams.push(...condition.params);
    }
  }
  const residual: SqlFragment = { sql: residualConditions.join(' AND '), params: residualParams };
  const exact = translations.every((translation) => translation.exact);
  if (!driver?.lookup) {
    return { matchesNothing: false, exact, where: residual };
  }
  const lookup = driver.lookup.sql;
  return {
    matchesNothing: false,
    exact,
    where: { sql: `r.pk IN (${lookup.sql}) AND ${residual.sql}`, params: [...lookup.params, ...residual.params] },
    driver: { candidates: lookup, residual, reference: driver.lookup.reference },
  };
}

function translateFilter(
  resourceType: string,
  filter: Filter,
  indexed: ReadonlyMap<string, IndexedParameter>
): FilterTranslation {
  if (filter.code.startsWith('_has:') || filter.code.includes('.')) {
    throw new OperationOutcomeError(badRequest(`Chained search is not supported: ${filter.code}`));
  }
  const searchParameter = getSearchParameter(resourceType, filter.code);
  if (!searchParameter) {
    throw new OperationOutcomeError(badRequest(`Unknown search parameter: ${filter.code}`));
  }
  if (!isPositiveComparison(filter.operator)) {
    return NOT_PUSHED;
  }
  switch (filter.code) {
    case '_id':
      return translateId(filter);
    case '_project':
      return translateProject(filter);
    case '_lastUpdated':
      return translateDateColumn(filter);
  }
  const parameter = indexed.get(filter.code);
  switch (parameter?.type) {
    case 'reference':
      return translateReference(resourceType, parameter, filter);
    case 'token':
      return translateToken(resourceType, parameter, filter);
    case 'date':
      return translateIndexedDate(resourceType, parameter, filter);
    default:
      return NOT_PUSHED;
  }
}

/** The matcher treats every operator but negation and presence as "has one of these values" (or a date comparison). */
function isPositiveComparison(operator: Operator): boolean {
  return (
    operator !== Operator.NOT_EQUALS &&
    operator !== Operator.NOT &&
    operator !== Operator.MISSING &&
    operator !== Operator.PRESENT
  );
}

interface TokenPart {
  /** Lower-cased code, or undefined for `system|` (any code in the system). */
  readonly code: string | undefined;
  /** Lower-cased system; '' means "no system" (`|code`); undefined means any system. */
  readonly system: string | undefined;
}

/** Parses token values as `matchesTokenValue` does; undefined when a value cannot be expressed in SQL. */
function parseTokenParts(value: string): TokenPart[] | undefined {
  const parts: TokenPart[] = [];
  for (const part of splitSearchOnComma(value)) {
    if (part.includes('|')) {
      const [system, code] = part.split('|').map((segment) => segment.toLowerCase());
      if (!system && !code) {
        continue; // matches nothing
      }
      parts.push({ code: code || undefined, system: system ?? '' });
    } else if (part === '') {
      return undefined; // the matcher's answer depends on whether a token's value is '' or absent
    } else {
      parts.push({ code: part.toLowerCase(), system: undefined });
    }
  }
  return parts;
}

function translateToken(resourceType: string, parameter: IndexedParameter, filter: Filter): FilterTranslation {
  const parts = parseTokenParts(filter.value);
  if (!parts) {
    return NOT_PUSHED;
  }
  if (parts.length === 0) {
    return MATCHES_NOTHING;
  }
  const alternatives: string[] = [];
  const alternativeParams: SQLInputValue[] = [];
  for (const part of parts) {
    if (part.code === undefined) {
      alternatives.push('extra = ?');
      alternativeParams.push(part.system ?? '');
    } else if (part.system === undefined) {
      alternatives.push('value = ?');
      alternativeParams.push(part.code);
    } else {
      alternatives.push('(value = ? AND extra = ?)');
      alternativeParams.push(part.code, part.system);
    }
  }
  const anyOf = `(${alternatives.join(' OR ')})`;
  const codes = parts.map((part) => part.code);
  const lookup: IndexLookup | undefined = codes.every((code) => code !== undefined)
    ? {
        sql: {
          sql:
            'SELECT resource_pk FROM search_index WHERE resource_type = ? AND param = ? ' +
            `AND value IN (${placeholders(codes.length)}) AND ${anyOf}`,
          params: [resourceType, parameter.code, ...codes, ...alternativeParams],
        },
        rank: parameter.code === 'identifier' ? RANK_REFERENCE : RANK_TOKEN,
      }
    : undefined;
  return { exact: true, lookup, condition: () => existsRow(parameter.code, anyOf, alternativeParams) };
}

function translateReference(resourceType: string, parameter: IndexedParameter, filter: Filter): FilterTranslation {
  const references = splitSearchOnComma(filter.value);
  // Without 'Type/' the matcher compares id suffixes, which the index cannot look up.
  if (references.some((reference) => !reference.includes('/'))) {
    return NOT_PUSHED;
  }
  const anyOf = `value IN (${placeholders(references.length)})`;
  return {
    exact: true,
    lookup: {
      sql: {
        sql: `SELECT resource_pk FROM search_index WHERE resource_type = ? AND param = ? AND ${anyOf}`,
        params: [resourceType, parameter.code, ...references],
      },
      rank: parameter.code === '_compartment' ? RANK_COMPARTMENT : RANK_REFERENCE,
      reference: references.length === 1 ? { code: parameter.code, value: references[0] } : undefined,
    },
    condition: () => existsRow(parameter.code, anyOf, references),
  };
}

function translateIndexedDate(resourceType: string, parameter: IndexedParameter, filter: Filter): FilterTranslation {
  const comparison = dateComparison(filter, 'value', 'extra');
  if (!comparison) {
    return NOT_PUSHED;
  }
  if (comparison.sql === '') {
    return MATCHES_NOTHING;
  }
  return {
    exact: true,
    lookup: {
      sql: {
        sql: `SELECT resource_pk FROM search_index WHERE resource_type = ? AND param = ? AND ${comparison.sql}`,
        params: [resourceType, parameter.code, ...comparison.params],
      },
      rank: RANK_DATE,
    },
    condition: () => existsRow(parameter.code, comparison.sql, comparison.params),
  };
}

function translateDateColumn(filter: Filter): FilterTranslation {
  // Stored lastUpdated values are full-precision UTC instants, so the period starts and ends at the value.
  const comparison = dateComparison(filter, '#', '#');
  if (!comparison) {
    return NOT_PUSHED;
  }
  if (comparison.sql === '') {
    return MATCHES_NOTHING;
  }
  return {
    exact: true,
    condition: (columnPrefix) => ({
      sql: comparison.sql.replaceAll('#', `${columnPrefix}r.last_updated`),
      params: comparison.params,
    }),
  };
}

function translateProject(filter: Filter): FilterTranslation {
  const parts = parseTokenParts(filter.value);
  if (!parts) {
    return NOT_PUSHED;
  }
  // meta.project is a bare string: only `code` and `|code` can match it.
  const projects = parts.filter((part) => part.code !== undefined && !part.system).map((part) => part.code as string);
  if (projects.length === 0) {
    return MATCHES_NOTHING;
  }
  return {
    exact: true,
    condition: (columnPrefix) => ({
      sql: `${columnPrefix}r.project IN (${placeholders(projects.length)})`,
      params: projects,
    }),
  };
}

function translateId(filter: Filter): FilterTranslation {
  const ids = new Set<string>();
  for (const part of splitSearchOnComma(filter.value)) {
    const [system, id] = part.includes('|') ? part.split('|') : ['', part];
    // Ids have no system: only `id` and `|id` can match.
    if (!system && id) {
      ids.add(id);
      ids.add(id.toLowerCase());
    }
  }
  if (ids.size === 0) {
    return MATCHES_NOTHING;
  }
  const values = [...ids];
  return {
    // The matcher compares ids case-insensitively; an id stored with upper-case letters is found only as given.
    exact: false,
    selectsById: true,
    condition: () => ({ sql: `r.id IN (${placeholders(values.length)})`, params: values }),
  };
}

/**
 * The date comparison of `matchesDateValue` over a start and an end column; undefined when it cannot be
 * expressed (an unparseable value), an empty `sql` when no value can match.
 */
function dateComparison(filter: Filter, startColumn: string, endColumn: string): SqlFragment | undefined {
  const alternatives: string[] = [];
  const params: SQLInputValue[] = [];
  for (const part of splitSearchOnComma(filter.value)) {
    let period: ReturnType<typeof toPeriod>;
    try {
      period = toPeriod(part);
    } catch {
      return undefined;
    }
    if (!period?.start || !period.end) {
      continue; // the matcher rejects a value it cannot read as a period
    }
    const { start, end } = period;
    switch (filter.operator) {
      case Operator.EQUALS:
      case Operator.APPROXIMATELY:
        alternatives.push(`(${startColumn} < ? AND ${endColumn} > ?)`);
        params.push(end, start);
        break;
      case Operator.LESS_THAN:
        alternatives.push(`${startColumn} < ?`);
        params.push(start);
        break;
      case Operator.GREATER_THAN:
        alternatives.push(`${endColumn} > ?`);
        params.push(end);
        break;
      case Operator.LESS_THAN_OR_EQUALS:
        alternatives.push(`${startColumn} <= ?`);
        params.push(end);
        break;
      case Operator.GREATER_THAN_OR_EQUALS:
        alternatives.push(`${endColumn} >= ?`);
        params.push(start);
        break;
      case Operator.STARTS_AFTER:
        alternatives.push(`${startColumn} > ?`);
        params.push(end);
        break;
      case Operator.ENDS_BEFORE:
        alternatives.push(`${endColumn} < ?`);
        params.push(start);
        break;
      default:
        break; // the matcher answers false for other operators on dates
    }
  }
  if (alternatives.length === 0) {
    return { sql: '', params: [] };
  }
  return { sql: `(${alternatives.join(' OR ')})`, params };
}

function existsRow(param: string, condition: string, conditionParams: readonly SQLInputValue[]): SqlFragment {
  return {
    sql: `EXISTS (SELECT 1 FROM search_index WHERE resource_pk = r.pk AND param = ? AND ${condition})`,
    params: [param, ...conditionParams],
  };
}

function placeholders(count: number): string {
  return new Array(count).fill('?').join(', ');
}
