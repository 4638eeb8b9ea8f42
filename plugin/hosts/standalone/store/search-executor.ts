/**
 * Runs the match part of a search (filters, sort, offset, count, total) against the store.
 *
 * `matchesSearchRequest` from @medplum/core decides what matches where SQL cannot: a plan is exact when its SQL
 * selects exactly the matches (search-plan.ts), and then SQL decides; otherwise SQL narrows the candidates and
 * every returned resource has passed the matcher. SQL orders them when it can (see sort.ts).
 * - Exact plan and SQL order: SQL pages with LIMIT/OFFSET and counts the total; only the page is loaded.
 * - Inexact plan and SQL order: candidates are read in order and checked one by one until the page is full
 *   (or all of them, when a total is asked for).
 * - An index lookup drives and the index answers the sort: candidates are ordered from index rows alone, then
 *   checked against the other conditions in that order until the page is full (see searchOrderedCandidates). One
 *   reference value sorted by a date the index pairs with it (search-index.ts) is a single ordered range read.
 * - Order SQL cannot give (a sort on a parameter outside the index): all candidates are loaded, checked and sorted.
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
import type { SQLInputValue } from 'node:sqlite';
import { toNumber, type ResourceStore } from './resource-store.ts';
import type { IndexedParameter } from './search-index.ts';
import { planFilters, type FilterPlan, type SqlFragment } from './search-plan.ts';
import { resolveSortRules, sortResources, sqlOrderBy, type ResolvedSortRule } from './sort.ts';

/** The matching resources of one page, and the total when the request asked for one. */
export interface SearchPage<T extends Resource> {
  readonly resources: WithId<T>[];
  readonly total: number | undefined;
}

interface PageWindow {
  readonly offset: number;
  readonly count: number;
  readonly wantsTotal: boolean;
}

/** The `param` of the index's sorted lookup of a reference parameter by a date parameter, if it keeps one. */
export type SortedLookups = (filter: string, sort: string) => string | undefined;

const NO_SORTED_LOOKUPS: SortedLookups = () => undefined;

/**
 * Runs `searchRequest` with `indexed` as the parameters the search index holds for its resource type, and
 * `sortedLookups` as its sorted lookups.
 */
export function executeSearch<T extends Resource>(
  store: ResourceStore,
  indexed: ReadonlyMap<string, IndexedParameter>,
  searchRequest: SearchRequest<T>,
  sortedLookups: SortedLookups = NO_SORTED_LOOKUPS
): SearchPage<T> {
  if (searchRequest.types?.length) {
    throw new OperationOutcomeError(badRequest('Searching several resource types at once is not supported'));
  }
  validateResourceType(searchRequest.resourceType);
  const window: PageWindow = {
    offset: nonNegative(searchRequest.offset, 0),
    count: nonNegative(searchRequest.count, DEFAULT_SEARCH_COUNT),
    // Medplum's server counts only when asked; 'estimate' is answered with the exact count.
    wantsTotal: searchRequest.total === 'accurate' || searchRequest.total === 'estimate',
  };
  const plan = planFilters(searchRequest.resourceType, searchRequest.filters ?? [], indexed);
  const rules = resolveSortRules(searchRequest.resourceType, searchRequest.sortRules);
  if (plan.matchesNothing) {
    return { resources: [], total: window.wantsTotal ? 0 : undefined };
  }
  const orderedCandidates = plan.driver ? orderCandidates(searchRequest.resourceType, plan.driver, rules, indexed, sortedLookups) : undefined;
  if (plan.driver && orderedCandidates) {
    return searchOrderedCandidates(store, plan, plan.driver, orderedCandidates, searchRequest, window);
  }
  const orderBy = sqlOrderBy(rules, indexed);
  if (!orderBy) {
    return searchSortedInMemory(store, plan, rules, searchRequest, window);
  }
  const select = `SELECT r.pk FROM resources r WHERE ${plan.where.sql} ORDER BY ${orderBy.sql}`;
  const params = [...plan.where.params, ...orderBy.params];
  if (plan.exact) {
    const pageRows = store.queryAll(`${select} LIMIT ? OFFSET ?`, [...params, window.count, window.offset]);
    // SQL selected exactly the matches and counted them for the total; the page is what it selected.
    const resources = loadAll<T>(store, pageRows.map((row) => toNumber(row.pk)));
    return { resources, total: window.wantsTotal ? countMatches(store, plan) : undefined };
  }
  return searchCheckingInOrder(store, select, params, searchRequest, window);
}

function searchCheckingInOrder<T extends Resource>(
  store: ResourceStore,
  select: string,
  params: readonly SQLInputValue[],
  searchRequest: SearchRequest<T>,
  window: PageWindow
): SearchPage<T> {
  const resources: WithId<T>[] = [];
  if (window.count === 0 && !window.wantsTotal) {
    return { resources, total: undefined };
  }
  let matched = 0;
  for (const row of store.queryIterate(select, params)) {
    const resource = loadIfMatching(store, toNumber(row.pk), searchRequest);
    if (!resource) {
      continue;
    }
    if (matched >= window.offset && resources.length < window.count) {
      resources.push(resource);
    }
    matched++;
    if (!window.wantsTotal && resources.length >= window.count) {
      break;
    }
  }
  return { resources, total: window.wantsTotal ? matched : undefined };
}

/**
 * The driver's candidate pks in the order of the sort rules, from index rows alone; undefined when the index does
 * not answer the sort. The order is {@link sqlOrderBy}'s: a resource's largest value first descending (its smallest
 * ascending), those without one first descending (last ascending), ties by pk.
 */
function orderCandidates(
  resourceType: string,
  driver: NonNullable<FilterPlan['driver']>,
  rules: readonly ResolvedSortRule[],
  indexed: ReadonlyMap<string, IndexedParameter>,
  sortedLookups: SortedLookups
): SqlFragment | undefined {
  const pair = driver.reference && rules.length === 1 ? sortedLookups(driver.reference.code, rules[0].code) : undefined;
  if (driver.reference && pair) {
    const direction = rules[0].descending ? 'DESC' : 'ASC';
    return {
      sql: `SELECT resource_pk AS pk FROM search_index WHERE resource_type = ? AND param = ? AND value = ? ORDER BY extra ${direction}, resource_pk ${direction}`,
      params: [resourceType, pair, driver.reference.value],
    };
  }
  const order = sqlOrderBy(rules, indexed, 'candidate.resource_pk');
  if (!order) {
    return undefined;
  }
  return {
    sql: `SELECT candidate.resource_pk AS pk FROM (${driver.candidates.sql}) candidate ORDER BY ${order.sql}`,
    params: [...driver.candidates.params, ...order.params],
  };
}

/**
 * Sorting in one query reads the `resources` row of every candidate (a conversation's every turn) before LIMIT
 * applies. Here the candidates are ordered from their index rows alone and each is checked against the rest of the
 * filters in that order, so `resources` rows are read for about one page: the newest 50 turns of a 1,000-turn
 * conversation read 51 rows, not 2,000. A filter that rejects most candidates costs one small query per candidate.
 */
function searchOrderedCandidates<T extends Resource>(
  store: ResourceStore,
  plan: FilterPlan,
  driver: NonNullable<FilterPlan['driver']>,
  orderedCandidates: SqlFragment,
  searchRequest: SearchRequest<T>,
  window: PageWindow
): SearchPage<T> {
  const resources: WithId<T>[] = [];
  if (window.count === 0 && !window.wantsTotal) {
    return { resources, total: undefined };
  }
  // With an exact plan SQL decides the matches, so a total is counted in SQL and the scan stops with the page.
  const scanAll = window.wantsTotal && !plan.exact;
  // The rest of the SQL conditions and the content in one lookup per candidate.
  const load = `SELECT r.content FROM resources r WHERE r.pk = ? AND ${driver.residual.sql}`;
  // A resource with several of the looked-up values has several index rows.
  const seen = new Set<number>();
  let matched = 0;
  for (const row of store.queryIterate(orderedCandidates.sql, orderedCandidates.params)) {
    const pk = toNumber(row.pk);
    if (seen.has(pk)) {
      continue;
    }
    seen.add(pk);
    const [loaded] = store.queryAll(load, [pk, ...driver.residual.params]);
    if (!loaded) {
      continue;
    }
    if (plan.exact && matched < window.offset) {
      matched++;
      continue;
    }
    const resource = plan.exact ? parseResource<T>(loaded.content) : matching(parseResource<T>(loaded.content), searchRequest);
    if (!resource) {
      continue;
    }
    if (matched >= window.offset && resources.length < window.count) {
      resources.push(resource);
    }
    matched++;
    if (!scanAll && resources.length >= window.count) {
      break;
    }
  }
  if (!window.wantsTotal) {
    return { resources, total: undefined };
  }
  return { resources, total: plan.exact ? countMatches(store, plan) : matched };
}

function searchSortedInMemory<T extends Resource>(
  store: ResourceStore,
  plan: FilterPlan,
  rules: readonly ResolvedSortRule[],
  searchRequest: SearchRequest<T>,
  window: PageWindow
): SearchPage<T> {
  // Loaded in insertion order (reversed for a descending first rule), the tie order sqlOrderBy gives.
  const direction = rules[0]?.descending ? 'DESC' : 'ASC';
  const rows = store.queryAll(
    `SELECT r.content FROM resources r WHERE ${plan.where.sql} ORDER BY r.pk ${direction}`,
    plan.where.params
  );
  const matches: WithId<T>[] = [];
  for (const row of rows) {
    const resource = parseResource<T>(row.content);
    if (resource && matchesSearchRequest(resource, searchRequest)) {
      matches.push(resource);
    }
  }
  const sorted = sortResources(matches, rules);
  return {
    resources: sorted.slice(window.offset, window.offset + window.count),
    total: window.wantsTotal ? sorted.length : undefined,
  };
}

function countMatches(store: ResourceStore, plan: FilterPlan): number {
  const [row] = store.queryAll(`SELECT COUNT(*) AS total FROM resources r WHERE ${plan.where.sql}`, plan.where.params);
  return toNumber(row?.total);
}

function loadAll<T extends Resource>(store: ResourceStore, pks: readonly number[]): WithId<T>[] {
  const resources: WithId<T>[] = [];
  for (const pk of pks) {
    const resource = parseResource<T>(store.contentOf(pk));
    if (resource) {
      resources.push(resource);
    }
  }
  return resources;
}

function loadIfMatching<T extends Resource>(
  store: ResourceStore,
  pk: number,
  searchRequest: SearchRequest<T>
): WithId<T> | undefined {
  return matching(parseResource<T>(store.contentOf(pk)), searchRequest);
}

function matching<T extends Resource>(resource: WithId<T> | undefined, searchRequest: SearchRequest<T>): WithId<T> | undefined {
  return resource && matchesSearchRequest(resource, searchRequest) ? resource : undefined;
}

/** `_count` and `_offset` as given when they are whole numbers of at least 0, else the default. */
function nonNegative(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isInteger(value) && value >= 0 ? value : fallback;
}

function parseResource<T extends Resource>(content: unknown): WithId<T> | undefined {
  return typeof content === 'string' ? (JSON.parse(content) as WithId<T>) : undefined;
}
