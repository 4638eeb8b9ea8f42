/**
 * Runs the match part of a search (filters, the caller's AccessPolicy, sort, offset, count, total) against the store.
 *
 * Candidates are read in slices (candidate-sources.ts), each one bounded statement that also tells, for each
 * candidate, whether the plan's SQL accepts it (search-plan.ts); between slices other requests run. When the plan
 * is exact SQL decides and only the returned page's resources are loaded; otherwise `matchesSearchRequest` from
 * @medplum/core (and each policy alternative's criteria) decides every candidate the SQL accepted.
 * - The order of the search is an index's order (a reference sorted by the date the index pairs with it, or the
 *   order without `_sort`): candidates are read in that order until the page is full, so a page of a patient's
 *   newest Observations reads about one page of index rows however large the chart or the store.
 * - Otherwise every candidate of the best lookup (or of the policy's lookups, or of the type) is read and the page
 *   kept as the best `offset + count` by the sort rules.
 * A total is counted (in slices) only when the request asks for one.
 */
import {
  DEFAULT_SEARCH_COUNT,
  OperationOutcomeError,
  badRequest,
  matchesSearchRequest,
  validateResourceType,
  type SearchRequest,
  type WithId,
} from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import type { SQLOutputValue } from 'node:sqlite';
import { countUpTo, indexRange, lookupSources, toCandidateRow, typeScan, type CandidateSource, type Cursor } from './candidate-sources.ts';
import { toNumber, type ResourceStore } from './resource-store.ts';
import type { IndexedParameter } from './search-index.ts';
import { estimateMatches } from './search-estimate.ts';
import type { ConditionVerdicts } from './verdict-cache.ts';
import { planSearch, type PolicyAlternative, type SearchPlan, type SqlFragment } from './search-plan.ts';
import { compareSortKeys, resolveSortRules, sortKey, sqlSortKey, type ResolvedSortRule, type SortKey } from './sort.ts';

/** The matching resources of one page, and the total when the request asked for one. */
export interface SearchPage<T extends Resource> {
  readonly resources: WithId<T>[];
  readonly total: number | undefined;
}

/** The store as a search reads it: every statement through `read`, which runs it when no other caller's transaction is open. */
export interface SearchStore {
  readonly rows: ResourceStore;
  read<R>(work: () => R): Promise<R>;
}

/** The `param` of the index's sorted lookup of a reference parameter by a date parameter, if it keeps one. */
export type SortedLookups = (filter: string, sort: string) => string | undefined;

interface PageWindow {
  readonly offset: number;
  readonly count: number;
  readonly wantsTotal: boolean;
}

/** The first slice of a search in order: about the page. Then twice the previous, up to this. */
const MAX_SLICE_ROWS = 256;
const MIN_SLICE_ROWS = 8;
/** A lookup with fewer index rows than this is read whole; with more, a search in the type's order scans the type. */
const SMALL_LOOKUP_ROWS = 2048;
/** Work between two chances for other requests to run. */
const YIELD_AFTER_MS = 2;
/** The columns of a slice's rows: the candidate's pk, its cursor key, whether it holds (or its version id), its sort keys. */
const SLICE_PK = 0;
const SLICE_CURSOR_KEY = 1;
const SLICE_DECIDED = 2;
const SLICE_KEYS = 3;

/**
 * Runs `searchRequest`, narrowed by `alternatives` (the caller's AccessPolicy; undefined: not narrowed), with
 * `indexed` as the parameters the search index holds for its type and `sortedLookups` as its sorted lookups.
 */
export async function executeSearch<T extends Resource>(
  store: SearchStore,
  indexed: ReadonlyMap<string, IndexedParameter>,
  searchRequest: SearchRequest<T>,
  alternatives: readonly PolicyAlternative[] | undefined,
  sortedLookups: SortedLookups
): Promise<SearchPage<T>> {
  if (searchRequest.types?.length) {
    throw new OperationOutcomeError(badRequest('Searching several resource types at once is not supported'));
  }
  const { resourceType } = searchRequest;
  validateResourceType(resourceType);
  const window: PageWindow = {
    offset: nonNegative(searchRequest.offset, 0),
    count: nonNegative(searchRequest.count, DEFAULT_SEARCH_COUNT),
    // Medplum's server counts only when asked. 'estimate' is answered from the index (below) when the caller's
    // AccessPolicy does not narrow the search; under one that does, with the exact count, so an estimate never
    // counts what the caller may not see.
    wantsTotal: searchRequest.total === 'accurate' || (searchRequest.total === 'estimate' && alternatives !== undefined),
  };
  const plan = planSearch(resourceType, searchRequest.filters ?? [], alternatives, indexed);
  if (searchRequest.total === 'estimate' && alternatives === undefined && !plan.matchesNothing) {
    // As a Medplum server's estimate: cheap and approximate (search-estimate.ts), from the project's own rows.
    const page = await executeSearch(store, indexed, { ...searchRequest, total: 'none' }, alternatives, sortedLookups);
    const estimate = await estimateMatches(store, resourceType, plan.driver, plan.project);
    // Never fewer than the page shows.
    return { ...page, total: Math.max(estimate, nonNegative(searchRequest.offset, 0) + page.resources.length) };
  }
  const rules = resolveSortRules(resourceType, searchRequest.sortRules);
  if (plan.matchesNothing || (window.count === 0 && !window.wantsTotal)) {
    return { resources: [], total: window.wantsTotal ? 0 : undefined };
  }
  const search = new SlicedSearch<T>(store, plan, window, (resource) => matchesAll(resource, searchRequest, alternatives));
  const ordered = await orderedSource(store, resourceType, plan, rules, sortedLookups);
  if (ordered) {
    return search.inOrder(ordered);
  }
  if (plan.driver) {
    const where = plan.whereFromDriver ?? plan.where;
    return search.collect(lookupSources(resourceType, plan.driver).map((source) => ({ source, where })), rules, indexed);
  }
  const sources = plan.policyDrivers ? plan.policyDrivers.flatMap((lookup) => lookupSources(resourceType, lookup)) : [typeScan(resourceType, plan.project, false)];
  return search.collect(sources.map((source) => ({ source, where: plan.where })), rules, indexed);
}

/** Where candidates come from, and the condition each must still meet there. */
interface Candidates {
  readonly source: CandidateSource;
  readonly where: SqlFragment;
}

/** A source whose order is the search's, when there is one worth reading in order. */
async function orderedSource(
  store: SearchStore,
  resourceType: string,
  plan: SearchPlan,
  rules: readonly ResolvedSortRule[],
  sortedLookups: SortedLookups
): Promise<Candidates | undefined> {
  const { driver } = plan;
  // The driver's sorted lookup, or that of a filter as selective as the driver (`type=...&entity-role=1&_sort=-date`
  // holds its order in `type>date` whichever of the two the request names first).
  for (const lookup of rules.length === 1 && driver ? [driver, ...(plan.peers ?? [])] : []) {
    const pair = lookup.kind === 'index' && lookup.values.length === 1 ? sortedLookups(lookup.param, rules[0].code) : undefined;
    if (pair) {
      // A reference's pair rows hold its values as its own rows do: read from the driver's, its filter holds.
      const where = lookup === driver ? (plan.whereFromDriver ?? plan.where) : plan.where;
      return { source: indexRange(resourceType, pair, lookup.values[0], rules[0].descending), where };
    }
  }
  const byLastUpdated = rules.length === 0 || (rules.length === 1 && rules[0].code === '_lastUpdated');
  if (!byLastUpdated) {
    return undefined;
  }
  const scan = { source: typeScan(resourceType, plan.project, rules[0]?.descending ?? false), where: plan.where };
  const drivers = plan.driver ? [plan.driver] : plan.policyDrivers;
  if (!drivers) {
    return scan;
  }
  // Few candidates: read them all. Many: the type in order, stopping at the page, is likely to read fewer.
  const counted = await store.read(() =>
    drivers.reduce((sum, lookup) => {
      const query = countUpTo(lookup, resourceType, SMALL_LOOKUP_ROWS);
      return sum + toNumber(store.rows.queryAll(query.sql, query.params)[0]?.total);
    }, 0)
  );
  return counted >= SMALL_LOOKUP_ROWS ? scan : undefined;
}

function matchesAll<T extends Resource>(resource: WithId<T>, searchRequest: SearchRequest<T>, alternatives: readonly PolicyAlternative[] | undefined): boolean {
  if (!matchesSearchRequest(resource, searchRequest)) {
    return false;
  }
  return (
    !alternatives ||
    alternatives.some(
      (alternative) =>
        matchesSearchRequest(resource, { resourceType: resource.resourceType, filters: [...alternative.filters] }) &&
        (alternative.compartment === undefined || (resource.meta?.compartment?.some((entry) => entry.reference === alternative.compartment?.reference) ?? false))
    )
  );
}

/** A candidate kept for the page, with its sort keys. */
interface Kept<T extends Resource> {
  readonly pk: number;
  readonly keys: readonly SortKey[];
  readonly resource?: WithId<T>;
}

/** One search's reading of slices: the page and the count so far. */
class SlicedSearch<T extends Resource> {
  readonly #store: SearchStore;
  readonly #plan: SearchPlan;
  readonly #window: PageWindow;
  readonly #matches: (resource: WithId<T>) => boolean;
  readonly #seen = new Set<number>();
  #matched = 0;
  #sliceStarted = performance.now();

  constructor(store: SearchStore, plan: SearchPlan, window: PageWindow, matches: (resource: WithId<T>) => boolean) {
    this.#store = store;
    this.#plan = plan;
    this.#window = window;
    this.#matches = matches;
  }

  /** Reads `candidates` in order until the page is full (to the end when a total is wanted). */
  async inOrder(candidates: Candidates): Promise<SearchPage<T>> {
    const { offset, count, wantsTotal } = this.#window;
    const page: Kept<T>[] = [];
    let cursor: Cursor | undefined;
    let size = Math.min(MAX_SLICE_ROWS, Math.max(MIN_SLICE_ROWS, offset + count + 1));
    // A page read in order is mostly the page read last time (a conversation's history, a chart's newest records).
    const verdicts = checksIndexRows(candidates.where) ? this.#store.rows.verdicts.of(candidates.where) : undefined;
    for (;;) {
      const slice = await this.#readSlice(candidates, cursor, size, [], false, verdicts);
      for (const candidate of slice.accepted) {
        if (!(await this.#confirm(candidate))) {
          continue;
        }
        if (this.#matched >= offset && page.length < count) {
          page.push(candidate);
        }
        this.#matched++;
      }
      cursor = slice.cursor;
      if (slice.exhausted || (!wantsTotal && page.length >= count)) {
        break;
      }
      size = Math.min(MAX_SLICE_ROWS, size * 2);
      await this.#pause();
    }
    return { resources: await this.#load(page), total: wantsTotal ? this.#matched : undefined };
  }

  /** Reads every candidate of `sources`, keeping the best `offset + count` by the rules. */
  async collect(sources: readonly Candidates[], rules: readonly ResolvedSortRule[], indexed: ReadonlyMap<string, IndexedParameter>): Promise<SearchPage<T>> {
    const { offset, count, wantsTotal } = this.#window;
    // Without rules, the order without `_sort`: last updated, oldest first.
    const sqlKeys = rules.length === 0 ? [{ sql: 'r.last_updated', params: [] }] : rules.map((rule) => sqlSortKey(rule, indexed));
    const inSql = sqlKeys.every((key): key is SqlFragment => key !== undefined);
    const descending = rules.length === 0 ? [false] : rules.map((rule) => rule.descending);
    const best = new BestCandidates<T>(offset + count, descending, rules[0]?.descending ?? false);
    for (const source of sources) {
      let cursor: Cursor | undefined;
      for (;;) {
        const slice = await this.#readSlice(source, cursor, MAX_SLICE_ROWS, inSql ? sqlKeys : [], !inSql);
        for (const candidate of slice.accepted) {
          if (!(await this.#confirm(candidate))) {
            continue;
          }
          this.#matched++;
          const keys = inSql ? candidate.keys : rules.map((rule) => sortKey(candidate.resource as WithId<T>, rule));
          best.add({ ...candidate, keys });
        }
        cursor = slice.cursor;
        if (slice.exhausted) {
          break;
        }
        await this.#pause();
      }
    }
    const page = best.sorted().slice(offset, offset + count);
    return { resources: await this.#load(page), total: wantsTotal ? this.#matched : undefined };
  }

  /**
   * One slice: the candidates after `cursor` that `where` accepts (each once per search), with `keys` read in SQL,
   * their content too when the matcher must decide or `withContent` asks. With `verdicts`, what `where` said of a
   * version before is taken from there, and only the others are checked (one statement for them all).
   */
  async #readSlice(
    { source, where }: Candidates,
    cursor: Cursor | undefined,
    limit: number,
    keys: readonly SqlFragment[],
    withContent = false,
    verdicts?: ConditionVerdicts
  ): Promise<{ accepted: Kept<T>[]; cursor: Cursor | undefined; exhausted: boolean }> {
    const inner = source.slice(cursor, limit);
    const direction = source.descending ? 'DESC' : 'ASC';
    const keyColumns = keys.map((key) => `, ${key.sql}`).join('');
    const decided = verdicts ? 'r.version_id' : `(${where.sql})`;
    // CROSS JOIN: the slice is the outer loop, each resource read by its pk.
    const sql =
      `SELECT c.pk, c.cursor_key, ${decided}${keyColumns} ` +
      `FROM (${inner.sql}) c CROSS JOIN resources r WHERE r.pk = c.pk ORDER BY c.cursor_key ${direction}, c.pk ${direction}`;
    const params = [...(verdicts ? [] : where.params), ...keys.flatMap((key) => key.params), ...inner.params];
    const loadContent = withContent || !this.#plan.exact;
    // Rows as arrays (resource-store.ts, queryArrays): pk, cursor key, the verdict or the version id, then the keys.
    const { rows, holds, contents } = await this.#store.read(() => {
      const sliceRows = this.#store.rows.queryArrays(sql, params);
      const sliceHolds = verdicts ? this.#decide(sliceRows, where, verdicts) : sliceRows.map((row) => toNumber(row[SLICE_DECIDED]) !== 0);
      const acceptedPks = sliceRows.filter((_row, index) => sliceHolds[index]).map((row) => toNumber(row[SLICE_PK]));
      return { rows: sliceRows, holds: sliceHolds, contents: loadContent && acceptedPks.length > 0 ? this.#store.rows.contentsOf(acceptedPks) : undefined };
    });
    const accepted: Kept<T>[] = [];
    let last: Cursor | undefined = cursor;
    for (const [index, row] of rows.entries()) {
      const candidate = toCandidateRow(row[SLICE_PK], row[SLICE_CURSOR_KEY]);
      last = candidate.cursor;
      if (!holds[index] || this.#seen.has(candidate.pk)) {
        continue;
      }
      this.#seen.add(candidate.pk);
      const content = contents?.get(candidate.pk);
      if (loadContent && content === undefined) {
        continue; // deleted since
      }
      accepted.push({ pk: candidate.pk, keys: keys.map((_, key) => toKey(row[SLICE_KEYS + key])), resource: content === undefined ? undefined : (JSON.parse(content) as WithId<T>) });
    }
    return { accepted, cursor: last, exhausted: rows.length < limit };
  }

  /**
   * Whether `where` holds for each row of a slice (its pk and version id): known verdicts from `verdicts`, the others
   * checked in one statement and kept. Called in the same synchronous step as the slice's read, so no write comes
   * between.
   */
  #decide(rows: readonly SQLOutputValue[][], where: SqlFragment, verdicts: ConditionVerdicts): boolean[] {
    const known = rows.map((row) => verdicts.get(toNumber(row[SLICE_PK]), String(row[SLICE_DECIDED])));
    const unknown = rows.filter((_row, index) => known[index] === undefined);
    if (unknown.length === 0) {
      return known as boolean[];
    }
    // The rows that hold come back; the others do not. CROSS JOIN: each row read by its pk (`r.pk IN (...)` let
    // SQLite's planner read the project's every resource of the type by another index instead).
    const holding = new Set<number>();
    const sql = `SELECT r.pk FROM json_each(?) checked CROSS JOIN resources r WHERE r.pk = checked.value AND (${where.sql})`;
    for (const [pk] of this.#store.rows.queryArrays(sql, [JSON.stringify(unknown.map((candidate) => toNumber(candidate[SLICE_PK]))), ...where.params])) {
      holding.add(toNumber(pk));
    }
    for (const row of unknown) {
      const pk = toNumber(row[SLICE_PK]);
      verdicts.set(pk, String(row[SLICE_DECIDED]), holding.has(pk));
    }
    return rows.map((row, index) => known[index] ?? holding.has(toNumber(row[SLICE_PK])));
  }

  /** True when the candidate matches: SQL decided it (an exact plan), or the matcher does. */
  async #confirm(candidate: Kept<T>): Promise<boolean> {
    if (this.#plan.exact) {
      return true;
    }
    await this.#pause();
    return candidate.resource !== undefined && this.#matches(candidate.resource);
  }

  /** The page's resources, in its order: those not loaded yet read by pk. */
  async #load(page: readonly Kept<T>[]): Promise<WithId<T>[]> {
    const missing = page.filter((candidate) => !candidate.resource).map((candidate) => candidate.pk);
    const contents = missing.length > 0 ? await this.#store.read(() => this.#store.rows.contentsOf(missing)) : new Map<number, string>();
    return page.flatMap((candidate) => {
      if (candidate.resource) {
        return [candidate.resource];
      }
      const content = contents.get(candidate.pk);
      return content === undefined ? [] : [JSON.parse(content) as WithId<T>];
    });
  }

  /** Lets other requests run once this search has held the event loop for a while. */
  async #pause(): Promise<void> {
    if (performance.now() - this.#sliceStarted < YIELD_AFTER_MS) {
      return;
    }
    await new Promise((resolve) => setImmediate(resolve));
    this.#sliceStarted = performance.now();
  }
}

/** The best `limit` candidates by their keys; ties by pk (descending when the first rule is). */
class BestCandidates<T extends Resource> {
  readonly #limit: number;
  readonly #compare: (left: Kept<T>, right: Kept<T>) => number;
  #kept: Kept<T>[] = [];

  constructor(limit: number, descending: readonly boolean[], pkDescending: boolean) {
    this.#limit = limit;
    const rules = descending.map((isDescending) => ({ descending: isDescending }));
    this.#compare = (left, right) => compareSortKeys(left.keys, right.keys, rules) || (pkDescending ? right.pk - left.pk : left.pk - right.pk);
  }

  add(candidate: Kept<T>): void {
    if (this.#limit === 0) {
      return;
    }
    this.#kept.push(candidate);
    if (this.#kept.length >= 2 * this.#limit + MAX_SLICE_ROWS) {
      this.#kept = this.sorted();
    }
  }

  sorted(): Kept<T>[] {
    return this.#kept.sort(this.#compare).slice(0, this.#limit);
  }
}

/** Whether the condition probes a candidate's index rows (`EXISTS`), the checks worth a verdict kept. */
function checksIndexRows(where: SqlFragment): boolean {
  return where.sql.includes('EXISTS');
}

function toKey(value: SQLOutputValue | undefined): SortKey {
  if (value === null || value === undefined) {
    return undefined;
  }
  return typeof value === 'bigint' ? Number(value) : (value as string | number);
}

/** `_count` and `_offset` as given when they are whole numbers of at least 0, else the default. */
function nonNegative(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isInteger(value) && value >= 0 ? value : fallback;
}
