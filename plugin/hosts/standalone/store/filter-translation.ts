/**
 * One search filter as SQL over `resources r` and the `search_index` rows of its resource, deciding exactly as
 * `matchesSearchRequest` from @medplum/core decides (its match.ts), or marked inexact: then the condition selects a
 * superset (or there is none) and the matcher has the last word on each candidate.
 *
 * What the matcher does, and so what this must: a filter on a parameter the type does not have matches nothing;
 * `:missing` / `:present` ask whether the parameter's expression gives any value; a reference or token filter is
 * "has one of these values", negated by `:not` / `ne`; a date filter compares periods; any other parameter type
 * matches nothing. A filter may also name an index lookup that can drive a search (its candidates, with `rank`:
 * lower is expected to be more selective).
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
import { PARAM_CODES_OF_TWO_NAMES, PARAM_CODE_OF_NAME } from './schema.ts';
import { presenceParam, type IndexedParameter } from './search-index.ts';

/** An SQL expression and its bound parameters. */
export interface SqlFragment {
  readonly sql: string;
  readonly params: readonly SQLInputValue[];
}

/**
 * Candidates a filter can be answered from: the resources with an index row of `param` equal to one of `values`
 * (kind 'index'), or of an id among `values`, lower-cased (kind 'id').
 */
export interface Lookup {
  readonly kind: 'index' | 'id';
  /** The parameter's code. */
  readonly param: string;
  /** The `param` of its index rows when not its code (search-index.ts, `IndexedParameter.rowParam`). */
  readonly rowParam?: string;
  readonly values: readonly string[];
  /** Lower is expected to be more selective. */
  readonly rank: number;
  /** A reference parameter: its values are references (a sorted lookup may pair one with a date). */
  readonly reference: boolean;
}

/** One filter, translated. */
export interface FilterTranslation {
  /** True when `condition` (or its absence, with `matchesNothing` false) decides exactly as the matcher. */
  readonly exact: boolean;
  readonly matchesNothing?: boolean;
  /** The condition on `r`; absent: every resource (exact) or no condition pushed (inexact). */
  readonly condition?: SqlFragment;
  readonly lookup?: Lookup;
  /** `_project` equal to exactly this (lower-cased) project. */
  readonly project?: string;
}

/**
 * Whose filter it is: a caller's (a parameter the type does not have is a 400, as on Medplum's server), or an
 * AccessPolicy criterion's (it matches nothing, as the matcher decides when the policy is evaluated).
 */
export type FilterOrigin = 'request' | 'policy';

const NOT_PUSHED: FilterTranslation = { exact: false };
const MATCHES_NOTHING: FilterTranslation = { exact: true, matchesNothing: true };
const MATCHES_ALL: FilterTranslation = { exact: true };

const RANK_BY_ID = 0;
const RANK_REFERENCE = 1;
const RANK_TOKEN = 2;
const RANK_COMPARTMENT = 3;

/** The types whose filters the matcher evaluates; a filter on any other type matches nothing. */
const MATCHED_TYPES = new Set(['reference', 'string', 'uri', 'token', 'date']);

/** Translates one filter of a search on `resourceType`, `indexed` being the parameters the index holds for it. */
export function translateFilter(
  resourceType: string,
  filter: Filter,
  indexed: ReadonlyMap<string, IndexedParameter>,
  origin: FilterOrigin
): FilterTranslation {
  const searchParameter = filter.code.startsWith('_has:') || filter.code.includes('.') ? undefined : getSearchParameter(resourceType, filter.code);
  if (!searchParameter) {
    if (origin === 'policy') {
      return MATCHES_NOTHING;
    }
    const chained = filter.code.startsWith('_has:') || filter.code.includes('.');
    throw new OperationOutcomeError(badRequest(`${chained ? 'Chained search is not supported' : 'Unknown search parameter'}: ${filter.code}`));
  }
  const parameter = indexed.get(filter.code);
  if (filter.operator === Operator.MISSING || filter.operator === Operator.PRESENT) {
    return parameter ? translatePresence(parameter, filter) : NOT_PUSHED;
  }
  if (!MATCHED_TYPES.has(searchParameter.type as string)) {
    return MATCHES_NOTHING;
  }
  const negated = filter.operator === Operator.NOT_EQUALS || filter.operator === Operator.NOT;
  switch (filter.code) {
    case '_id':
      return negated ? NOT_PUSHED : translateId(filter);
    case '_project':
      return negated ? NOT_PUSHED : translateProject(filter);
    case '_lastUpdated':
      return negated ? NOT_PUSHED : translateDateColumn(filter);
  }
  switch (parameter?.type) {
    case 'reference':
      return translateReference(parameter, filter, negated);
    case 'token':
      return translateToken(parameter, filter, negated);
    case 'date':
      return negated ? NOT_PUSHED : translateIndexedDate(parameter, filter);
    default:
      return NOT_PUSHED;
  }
}

/** Rows a resource has for the parameter `code`, where `condition` (on the row's value and extra) holds. */
export function existsRow(code: string, condition: string, conditionParams: readonly SQLInputValue[]): SqlFragment {
  return {
    sql: `EXISTS (SELECT 1 FROM search_index WHERE resource_pk = r.pk AND param = ${PARAM_CODE_OF_NAME} AND ${condition})`,
    params: [code, ...conditionParams],
  };
}

/** The lookup of resources with an index row of `param` equal to `value`, ranked as a compartment. */
export function compartmentLookup(value: string): Lookup {
  return referenceLookup('_compartment', [value]);
}

/**
 * The lookup of resources with an index row of the reference parameter `param` (its rows under `rowParam`) equal to
 * one of `values`.
 */
export function referenceLookup(param: string, values: readonly string[], rowParam: string = param): Lookup {
  return { kind: 'index', param, rowParam, values, rank: param === '_compartment' ? RANK_COMPARTMENT : RANK_REFERENCE, reference: true };
}

/** The `param` of a lookup's index rows. */
export function rowParamOf(lookup: Lookup): string {
  return lookup.rowParam ?? lookup.param;
}

/** `:missing` / `:present`: whether the expression gives any value, a searchable one or one with a presence row. */
function translatePresence(parameter: IndexedParameter, filter: Filter): FilterTranslation {
  const wanted = (filter.operator === Operator.MISSING && filter.value === 'false') || (filter.operator === Operator.PRESENT && filter.value === 'true');
  const present = `EXISTS (SELECT 1 FROM search_index WHERE resource_pk = r.pk AND param IN ${PARAM_CODES_OF_TWO_NAMES})`;
  return { exact: true, condition: { sql: wanted ? present : `NOT ${present}`, params: [parameter.rowParam, presenceParam(parameter.code)] } };
}

/** "Has one of the rows", or with `negated` "has none of them". */
function hasRow(code: string, condition: string, conditionParams: readonly SQLInputValue[], negated: boolean): SqlFragment {
  const exists = existsRow(code, condition, conditionParams);
  return negated ? { sql: `NOT ${exists.sql}`, params: exists.params } : exists;
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

function translateToken(parameter: IndexedParameter, filter: Filter, negated: boolean): FilterTranslation {
  const parts = parseTokenParts(filter.value);
  if (!parts) {
    return NOT_PUSHED;
  }
  if (parts.length === 0) {
    // No value can match: nothing, or with a negation everything.
    return negated ? MATCHES_ALL : MATCHES_NOTHING;
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
  const condition = hasRow(parameter.code, `(${alternatives.join(' OR ')})`, alternativeParams, negated);
  const codes = parts.map((part) => part.code);
  const lookup: Lookup | undefined =
    !negated && codes.every((code) => code !== undefined)
      ? { kind: 'index', param: parameter.code, values: [...new Set(codes as string[])], rank: parameter.code === 'identifier' ? RANK_REFERENCE : RANK_TOKEN, reference: false }
      : undefined;
  return { exact: true, lookup, condition };
}

function translateReference(parameter: IndexedParameter, filter: Filter, negated: boolean): FilterTranslation {
  const references = splitSearchOnComma(filter.value);
  // Without 'Type/' the matcher compares id suffixes, which the index cannot look up.
  if (references.some((reference) => !reference.includes('/'))) {
    return NOT_PUSHED;
  }
  const values = [...new Set(references)];
  return {
    exact: true,
    lookup: negated ? undefined : referenceLookup(parameter.code, values, parameter.rowParam),
    condition: hasRow(parameter.rowParam, `value IN (${placeholders(values.length)})`, values, negated),
  };
}

function translateIndexedDate(parameter: IndexedParameter, filter: Filter): FilterTranslation {
  const comparison = dateComparison(filter, 'value', 'extra');
  if (!comparison) {
    return NOT_PUSHED;
  }
  if (comparison.sql === '') {
    return MATCHES_NOTHING;
  }
  return { exact: true, condition: existsRow(parameter.code, comparison.sql, comparison.params) };
}

function translateDateColumn(filter: Filter): FilterTranslation {
  // Stored lastUpdated values are full-precision UTC instants, so the period starts and ends at the value.
  const comparison = dateComparison(filter, 'r.last_updated', 'r.last_updated');
  if (!comparison) {
    return NOT_PUSHED;
  }
  if (comparison.sql === '') {
    return MATCHES_NOTHING;
  }
  return { exact: true, condition: comparison };
}

function translateProject(filter: Filter): FilterTranslation {
  const parts = parseTokenParts(filter.value);
  if (!parts) {
    return NOT_PUSHED;
  }
  // meta.project is a bare string: only `code` and `|code` can match it.
  const projects = [...new Set(parts.filter((part) => part.code !== undefined && !part.system).map((part) => part.code as string))];
  if (projects.length === 0) {
    return MATCHES_NOTHING;
  }
  return {
    exact: true,
    condition: { sql: `r.project IN (${placeholders(projects.length)})`, params: projects },
    project: projects.length === 1 ? projects[0] : undefined,
  };
}

function translateId(filter: Filter): FilterTranslation {
  const ids = new Set<string>();
  for (const part of splitSearchOnComma(filter.value)) {
    const [system, id] = part.includes('|') ? part.split('|') : ['', part];
    // Ids have no system: only `id` and `|id` can match, compared without regard to case.
    if (!system && id) {
      ids.add(id.toLowerCase());
    }
  }
  if (ids.size === 0) {
    return MATCHES_NOTHING;
  }
  const values = [...ids];
  return {
    exact: true,
    lookup: { kind: 'id', param: '_id', values, rank: RANK_BY_ID, reference: false },
    condition: { sql: `lower(r.id) IN (${placeholders(values.length)})`, params: values },
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

/** `count` question marks, comma separated. */
export function placeholders(count: number): string {
  return new Array(count).fill('?').join(', ');
}
