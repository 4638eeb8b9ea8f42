/**
 * A search's filters, and the caller's AccessPolicy when it narrows the search, as one SQL condition over
 * `resources r` and the lookups that can drive it.
 *
 * The policy is an OR of alternatives (its rules for the type, as `satisfiedAccessPolicy` tries them), each the AND
 * of its criteria's filters and, when the rule has one, its compartment. Each filter becomes a condition that
 * selects exactly the resources `matchesSearchRequest` accepts (filter-translation.ts), so the whole is exact when
 * every filter is; otherwise it selects a superset and the plan is marked inexact (the executor then has the
 * matcher decide each candidate, policy alternatives included).
 */
import type { Filter } from '@medplum/core';
import {
  compartmentLookup,
  existsRow,
  placeholders,
  referenceLookup,
  rowParamOf,
  translateFilter,
  type FilterTranslation,
  type Lookup,
  type SqlFragment,
} from './filter-translation.ts';
import type { IndexedParameter } from './search-index.ts';

export type { Lookup, SqlFragment } from './filter-translation.ts';

/** One way an AccessPolicy lets a resource be seen: its criteria's filters, and a compartment it must be in. */
export interface PolicyAlternative {
  readonly filters: readonly Filter[];
  /** The rule's `compartment`: some entry of the resource's `meta.compartment` must have its `reference`. */
  readonly compartment?: { readonly reference?: string };
}

/** The SQL form of a search's filters and its policy. */
export interface SearchPlan {
  /** True when some filter (or the whole policy) can match no resource, so there is nothing to query. */
  readonly matchesNothing: boolean;
  /** True when `where` selects exactly the matching resources; false when it selects a superset. */
  readonly exact: boolean;
  /** Every condition (type, not deleted, the request's filters, the policy) on `resources r`. */
  readonly where: SqlFragment;
  /** The request's most selective lookup. */
  readonly driver?: Lookup;
  /**
   * `where` without the driver's own filter, for candidates read from the driver's rows: each has one of the
   * driver's values, which is all that filter asks (a reference, or an id). Absent when the driver's rows do not
   * decide its filter (a token's rows do not hold its system).
   */
  readonly whereFromDriver?: SqlFragment;
  /** The request's other lookups as selective as the driver (one of them may hold the search's order). */
  readonly peers?: readonly Lookup[];
  /** When the policy narrows and each of its alternatives has a lookup: those lookups, whose union holds every match. */
  readonly policyDrivers?: readonly Lookup[];
  /** The one project `_project` asks for (lower-cased), when it asks for one. */
  readonly project?: string;
}

const NOTHING: SearchPlan = { matchesNothing: true, exact: true, where: { sql: '0', params: [] } };

/**
 * Plans `filters` of a search on `resourceType` narrowed by `alternatives` (undefined: the policy does not narrow);
 * throws badRequest for a request filter on a parameter the type does not have.
 */
export function planSearch(
  resourceType: string,
  filters: readonly Filter[],
  alternatives: readonly PolicyAlternative[] | undefined,
  indexed: ReadonlyMap<string, IndexedParameter>
): SearchPlan {
  const request = filters.map((filter) => translateFilter(resourceType, filter, indexed, 'request'));
  if (request.some((translation) => translation.matchesNothing)) {
    return NOTHING;
  }
  const conditions: SqlFragment[] = [{ sql: 'r.resource_type = ? AND r.deleted = 0', params: [resourceType] }];
  conditions.push(...request.flatMap((translation) => (translation.condition ? [translation.condition] : [])));
  let exact = request.every((translation) => translation.exact);
  let policyDrivers: readonly Lookup[] | undefined;
  if (alternatives) {
    const policy = plannedPolicy(resourceType, alternatives, indexed);
    if (policy.matchesNothing) {
      return NOTHING;
    }
    exact &&= policy.exact;
    if (policy.condition) {
      conditions.push(policy.condition);
    }
    policyDrivers = policy.drivers;
  }
  const driver = bestLookup(request);
  const driving = request.find((translation) => translation.lookup === driver);
  const decidedByRows = driving?.condition !== undefined && (driver?.kind === 'id' || driver?.reference === true);
  return {
    matchesNothing: false,
    exact,
    where: all(conditions),
    driver,
    whereFromDriver: decidedByRows ? all(conditions.filter((condition) => condition !== driving.condition)) : undefined,
    peers: request.flatMap((translation) => (translation.lookup && translation.lookup !== driver && translation.lookup.rank === driver?.rank ? [translation.lookup] : [])),
    policyDrivers,
    project: request.find((translation) => translation.project !== undefined)?.project,
  };
}

interface PlannedAlternative {
  readonly exact: boolean;
  readonly condition: SqlFragment | undefined;
  readonly lookup: Lookup | undefined;
}

interface PlannedPolicy {
  readonly matchesNothing: boolean;
  readonly exact: boolean;
  readonly condition?: SqlFragment;
  readonly drivers?: readonly Lookup[];
}

// A caller's policy gives the same alternatives (one array per policy and type) on every search: planned once.
const plannedPolicies = new WeakMap<readonly PolicyAlternative[], WeakMap<ReadonlyMap<string, IndexedParameter>, PlannedPolicy>>();

function plannedPolicy(resourceType: string, alternatives: readonly PolicyAlternative[], indexed: ReadonlyMap<string, IndexedParameter>): PlannedPolicy {
  let byIndex = plannedPolicies.get(alternatives);
  if (!byIndex) {
    byIndex = new WeakMap();
    plannedPolicies.set(alternatives, byIndex);
  }
  let planned = byIndex.get(indexed);
  if (!planned) {
    planned = planPolicy(resourceType, alternatives, indexed);
    byIndex.set(indexed, planned);
  }
  return planned;
}

function planPolicy(resourceType: string, alternatives: readonly PolicyAlternative[], indexed: ReadonlyMap<string, IndexedParameter>): PlannedPolicy {
  const planned: PlannedAlternative[] = [];
  // Alternatives that are one reference parameter equal to some values (a care-team policy's `subject=%patient`, once
  // per patient) are one condition per parameter: one index probe for a resource, not one per patient.
  const referenceValues = new Map<string, { readonly rowParam: string; readonly values: Set<string> }>();
  for (const alternative of alternatives) {
    const translations = alternative.filters.map((filter) => translateFilter(resourceType, filter, indexed, 'policy'));
    if (translations.some((translation) => translation.matchesNothing)) {
      continue;
    }
    const [only] = translations;
    if (translations.length === 1 && only.exact && only.lookup?.kind === 'index' && only.lookup.reference && alternative.compartment === undefined) {
      const merged = referenceValues.get(only.lookup.param) ?? { rowParam: rowParamOf(only.lookup), values: new Set<string>() };
      only.lookup.values.forEach((value) => merged.values.add(value));
      referenceValues.set(only.lookup.param, merged);
      continue;
    }
    const conditions = translations.flatMap((translation) => (translation.condition ? [translation.condition] : []));
    let exact = translations.every((translation) => translation.exact);
    let lookup = bestLookup(translations);
    if (alternative.compartment !== undefined) {
      // `_compartment` rows hold each meta.compartment reference as it is: equal is what the policy checks.
      const reference = alternative.compartment.reference;
      if (reference !== undefined && indexed.has('_compartment')) {
        conditions.push(existsRow('_compartment', 'value = ?', [reference]));
        lookup ??= compartmentLookup(reference);
      } else {
        exact = false;
      }
    }
    planned.push({ exact, condition: conditions.length > 0 ? all(conditions) : undefined, lookup });
  }
  const merged = [...referenceValues].map(([param, { rowParam, values }]): PlannedAlternative => {
    const lookup = referenceLookup(param, [...values], rowParam);
    return { exact: true, condition: existsRow(rowParam, `value IN (${placeholders(values.size)})`, lookup.values), lookup };
  });
  planned.unshift(...merged);
  if (planned.length === 0) {
    return { matchesNothing: true, exact: true };
  }
  const exact = planned.every((alternative) => alternative.exact);
  // An alternative without a condition lets every resource through (or, inexact, may): the policy adds no condition.
  if (planned.some((alternative) => alternative.condition === undefined)) {
    return { matchesNothing: false, exact };
  }
  const conditions = planned.map((alternative) => alternative.condition as SqlFragment);
  const drivers = planned.every((alternative) => alternative.lookup) ? planned.map((alternative) => alternative.lookup as Lookup) : undefined;
  return { matchesNothing: false, exact, condition: any(conditions), drivers };
}

function bestLookup(translations: readonly FilterTranslation[]): Lookup | undefined {
  let best: Lookup | undefined;
  for (const translation of translations) {
    if (translation.lookup && (!best || translation.lookup.rank < best.rank)) {
      best = translation.lookup;
    }
  }
  return best;
}

function all(conditions: readonly SqlFragment[]): SqlFragment {
  return { sql: conditions.map((condition) => `(${condition.sql})`).join(' AND '), params: conditions.flatMap((condition) => condition.params) };
}

function any(conditions: readonly SqlFragment[]): SqlFragment {
  return { sql: `(${conditions.map((condition) => `(${condition.sql})`).join(' OR ')})`, params: conditions.flatMap((condition) => condition.params) };
}
