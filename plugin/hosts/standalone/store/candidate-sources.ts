/**
 * Where a search's candidates come from, one slice at a time: each slice is one SQL statement that reads at most a
 * given number of rows of an index, in the index's own order, continuing after the previous slice's last row
 * (keyset paging). So no statement's cost grows with the size of the store, and the executor can let other
 * requests run between two slices.
 *
 * The row limit is written into the statement, not bound: bound, SQLite plans the statement again at every run
 * (about 0.1 ms for a slice with a policy's conditions); the executor asks for few distinct limits.
 *
 * Sources:
 * - an index range: the `search_index` rows of one (parameter, value), in (extra, pk) order; for a sorted lookup
 *   (search-index.ts) that is the order of the sort;
 * - ids: the resources of the type with one of some ids (lower-cased), in pk order;
 * - the type: every resource of the type (in one project, when the search names one), in (last updated, pk) order,
 *   the order of a search without `_sort`.
 */
import type { SQLInputValue, SQLOutputValue } from 'node:sqlite';
import { placeholders, rowParamOf, type Lookup, type SqlFragment } from './filter-translation.ts';
import { toNumber } from './resource-store.ts';
import { PARAM_CODE_OF_NAME, TYPE_CODE_OF_NAME } from './schema.ts';

/** Where the previous slice ended: its last row's ordering key and pk. */
export interface Cursor {
  readonly key: string;
  readonly pk: number;
}

/** A candidate row of a slice: the resource's pk and the row's cursor. */
export interface CandidateRow {
  readonly pk: number;
  readonly cursor: Cursor;
}

/** A source of candidates, read in slices. */
export interface CandidateSource {
  /**
   * The SELECT of the slice after `cursor` (from the start when undefined): columns `pk` and `cursor_key`, at most
   * `limit` rows, in the source's order.
   */
  slice(cursor: Cursor | undefined, limit: number): SqlFragment;
  /** True when the source's order is descending (the outer statement repeats it). */
  readonly descending: boolean;
}

/** The `search_index` rows of `param` equal to `value`, in (extra, pk) order, or its reverse. */
export function indexRange(resourceType: string, param: string, value: string, descending: boolean): CandidateSource {
  const direction = descending ? 'DESC' : 'ASC';
  const after = descending ? '<' : '>';
  const select = `SELECT resource_pk AS pk, extra AS cursor_key FROM search_index WHERE type_code = ${TYPE_CODE_OF_NAME} AND param = ${PARAM_CODE_OF_NAME} AND value = ?`;
  const order = (limit: number): string => `ORDER BY extra ${direction}, resource_pk ${direction} LIMIT ${rowLimit(limit)}`;
  return {
    descending,
    slice: (cursor, limit) =>
      cursor
        ? { sql: `${select} AND (extra, resource_pk) ${after} (?, ?) ${order(limit)}`, params: [resourceType, param, value, cursor.key, cursor.pk] }
        : { sql: `${select} ${order(limit)}`, params: [resourceType, param, value] },
  };
}

/** The resources of the type whose lower-cased id is one of `ids`, in pk order. */
export function idRange(resourceType: string, ids: readonly string[]): CandidateSource {
  const select = `SELECT pk, '' AS cursor_key FROM resources WHERE resource_type = ? AND lower(id) IN (${placeholders(ids.length)})`;
  return {
    descending: false,
    slice: (cursor, limit) =>
      cursor
        ? { sql: `${select} AND pk > ? ORDER BY pk LIMIT ${rowLimit(limit)}`, params: [resourceType, ...ids, cursor.pk] }
        : { sql: `${select} ORDER BY pk LIMIT ${rowLimit(limit)}`, params: [resourceType, ...ids] },
  };
}

/** Every resource of the type (of `project`, when given), in (last updated, pk) order, or its reverse. */
export function typeScan(resourceType: string, project: string | undefined, descending: boolean): CandidateSource {
  const direction = descending ? 'DESC' : 'ASC';
  const after = descending ? '<' : '>';
  const scope = project === undefined ? 'resource_type = ?' : 'resource_type = ? AND project = ?';
  const scopeParams: SQLInputValue[] = project === undefined ? [resourceType] : [resourceType, project];
  const select = `SELECT pk, last_updated AS cursor_key FROM resources WHERE ${scope}`;
  const order = (limit: number): string => `ORDER BY last_updated ${direction}, pk ${direction} LIMIT ${rowLimit(limit)}`;
  return {
    descending,
    slice: (cursor, limit) =>
      cursor
        ? { sql: `${select} AND (last_updated, pk) ${after} (?, ?) ${order(limit)}`, params: [...scopeParams, cursor.key, cursor.pk] }
        : { sql: `${select} ${order(limit)}`, params: [...scopeParams] },
  };
}

/** The sources holding a lookup's candidates: one range per value (a resource may be in several). */
export function lookupSources(resourceType: string, lookup: Lookup): CandidateSource[] {
  if (lookup.kind === 'id') {
    return [idRange(resourceType, lookup.values)];
  }
  return lookup.values.map((value) => indexRange(resourceType, rowParamOf(lookup), value, false));
}

/**
 * At most `cap` of the lookup's index rows, counted: enough to tell a lookup with few candidates (read them all,
 * in any order) from one with many (better read in the order of the search, if it has one, and stopped early).
 */
export function countUpTo(lookup: Lookup, resourceType: string, cap: number): SqlFragment {
  if (lookup.kind === 'id') {
    return { sql: 'SELECT ? AS total', params: [lookup.values.length] };
  }
  return {
    sql: `SELECT COUNT(*) AS total FROM (SELECT 1 FROM search_index WHERE type_code = ${TYPE_CODE_OF_NAME} AND param = ${PARAM_CODE_OF_NAME} AND value IN (${placeholders(lookup.values.length)}) LIMIT ${rowLimit(cap)})`,
    params: [resourceType, rowParamOf(lookup), ...lookup.values],
  };
}

/** A whole number of rows, safe to write into SQL. */
function rowLimit(limit: number): number {
  if (!Number.isSafeInteger(limit) || limit < 0) {
    throw new Error(`Not a row limit: ${limit}`);
  }
  return limit;
}

/** A slice's row as the executor reads it. */
export function toCandidateRow(pkColumn: SQLOutputValue | undefined, cursorKey: SQLOutputValue | undefined): CandidateRow {
  const pk = toNumber(pkColumn);
  return { pk, cursor: { key: String(cursorKey ?? ''), pk } };
}
