/**
 * `_total=estimate` from the index, as a Medplum server answers it from its planner's statistics: cheap, close, and
 * made only of the caller's project's own rows (never a count that includes another project's resources).
 *
 * The search's most selective lookup is counted in the project up to {@link EXACT_UP_TO} matches: below that the
 * count is exact for that lookup. Beyond it, the density of matches among the project's resources of the type
 * over the stretch counted (by resource key) is applied to all of the project's resources of the type: the
 * conversations among a project's million Communications are estimated from the first ten thousand, in
 * milliseconds, without reading every match.
 */
import type { SQLInputValue } from 'node:sqlite';
import type { Lookup } from './filter-translation.ts';
import { placeholders, rowParamOf } from './filter-translation.ts';
import { toNumber } from './resource-store.ts';
import { PARAM_CODE_OF_NAME, TYPE_CODE_OF_NAME } from './schema.ts';
import type { SearchStore } from './search-executor.ts';

/** Matches counted one by one before the estimate extrapolates. */
export const EXACT_UP_TO = 10_000;

/** The estimated number of resources of the type in `project` that `lookup` selects (all of them without one). */
export async function estimateMatches(
  store: SearchStore,
  resourceType: string,
  lookup: Lookup | undefined,
  project: string | undefined,
  exactUpTo = EXACT_UP_TO
): Promise<number> {
  const scope = project === undefined ? { sql: 'resource_type = ?', params: [resourceType] } : { sql: 'resource_type = ? AND project = ?', params: [resourceType, project] };
  const count = (sql: string, params: readonly SQLInputValue[]): number => toNumber(store.rows.queryAll(sql, [...params])[0]?.total);
  return store.read(() => {
    // Index-only counts (resources_by_project): a deleted resource's row is counted too, as an estimate may.
    const ofType = count(`SELECT COUNT(*) AS total FROM resources WHERE ${scope.sql}`, scope.params);
    if (!lookup) {
      return ofType;
    }
    if (lookup.kind === 'id') {
      return Math.min(lookup.values.length, ofType);
    }
    const inProject = project === undefined ? '' : 'AND EXISTS (SELECT 1 FROM resources r WHERE r.pk = s.resource_pk AND r.project = ? AND r.deleted = 0)';
    const first = store.rows.queryAll(
      `SELECT COUNT(*) AS total, MIN(pk) AS low, MAX(pk) AS high FROM (SELECT s.resource_pk AS pk FROM search_index s
         WHERE s.type_code = ${TYPE_CODE_OF_NAME} AND s.param = ${PARAM_CODE_OF_NAME} AND s.value IN (${placeholders(lookup.values.length)}) ${inProject} LIMIT ${Math.trunc(exactUpTo)})`,
      [resourceType, rowParamOf(lookup), ...lookup.values, ...(project === undefined ? [] : [project])]
    )[0];
    const counted = toNumber(first?.total);
    if (counted < exactUpTo) {
      return counted;
    }
    const stretch = count(`SELECT COUNT(*) AS total FROM resources WHERE ${scope.sql} AND pk BETWEEN ? AND ?`, [
      ...scope.params,
      toNumber(first?.low),
      toNumber(first?.high),
    ]);
    return stretch > 0 ? Math.min(ofType, Math.round((counted / stretch) * ofType)) : counted;
  });
}
