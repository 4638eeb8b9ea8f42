/**
 * Which search parameters the store keeps in its `search_index` table, and the rows a resource gives them.
 *
 * Values are normalized exactly as `matchesSearchRequest` from @medplum/core normalizes them, so that an SQL
 * condition over the rows selects the same resources the matcher would:
 * - reference: `value` = the reference string ('Type/id'), `extra` = ''
 * - token: `value` = lower-cased code (or Identifier.value, or text), `extra` = lower-cased system or ''
 * - date: `value` = start of the period as a UTC instant ('0000' when open), `extra` = its end ('9999' when open)
 *
 * `:missing` and `:present` ask whether the parameter's expression gives any value at all, which is not the same as
 * having a row: a reference with only a `display` is a value without a searchable reference. Such a resource gets
 * one presence row (`<code>:present`, value and extra ''), so "present" is "has a row of the parameter or its
 * presence row".
 */
import {
  convertToSearchableDates,
  convertToSearchableReferences,
  convertToSearchableTokens,
  evalFhirPathTyped,
  getParsedExpressionForResourceType,
  getSearchParameter,
  toTypedValue,
  type FhirPathAtom,
  type TypedValue,
} from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';

/** Indexed search parameter codes by resource type; '*' applies to every resource type. */
export const INDEXED_SEARCH_PARAMETERS: Readonly<Record<string, readonly string[]>> = {
  '*': ['_compartment'],
  Communication: [
    'part-of',
    'subject',
    'category',
    'sent',
    'identifier',
    // Not an R4 search parameter: indexed when the host registers a SearchParameter with this code.
    'in-response-to',
    'sender',
    'recipient',
    'status',
    // The model a reply records (its `medium`, system urn:fhirgate:ai-model), for the review console's model filter.
    'medium',
  ],
  // The review console's disclosures (by patient, by user) and device sign-ins (docs/app.md).
  AuditEvent: ['type', 'subtype', 'entity', 'entity-role', 'agent', 'date', 'outcome'],
  // Every search a chat turn makes (plugin/chat/patient-context.ts, fhir-tools.ts) and every parameter of the
  // ready-made and device AccessPolicies' criteria, for the types a chart summary reads.
  Observation: ['identifier', 'device', 'subject', 'code', 'status', 'patient', 'date', 'performer', 'category'],
  Condition: ['patient', 'subject', 'clinical-status', 'recorded-date', 'code'],
  MedicationRequest: ['patient', 'subject', 'status', 'authoredon'],
  MedicationStatement: ['patient', 'subject', 'status', 'effective'],
  AllergyIntolerance: ['patient', 'clinical-status', 'date'],
  Device: ['identifier', 'status'],
};

/**
 * Searches the index answers in order in one range read: a reference or token parameter's value, sorted by a date
 * parameter. For each pair the store keeps rows `<filter>><sort>` (value: the reference, or the token's code or
 * text, whatever its system, so a range holds every match and the matcher confirms each; extra: the date), so
 * "a conversation's newest messages" (`Communication?part-of=...&_sort=-sent`) reads one page of index rows however
 * long the conversation is, instead of looking up and sorting the date of every message.
 */
export const SORTED_LOOKUPS: Readonly<Record<string, readonly { readonly filter: string; readonly sort: string }[]>> = {
  // A conversation's messages; and the conversations (and replies) of a project, of a user and about a patient,
  // newest first (the web app's lists: `Communication?category=ai-conversation&_sort=-sent`, with `sender`,
  // `recipient` or `subject`).
  Communication: [
    { filter: 'part-of', sort: 'sent' },
    { filter: 'category', sort: 'sent' },
    { filter: 'sender', sort: 'sent' },
    { filter: 'recipient', sort: 'sent' },
    { filter: 'subject', sort: 'sent' },
  ],
  // The disclosures of a patient, by a user, and all of them, newest first.
  AuditEvent: [
    { filter: 'entity', sort: 'date' },
    { filter: 'agent', sort: 'date' },
    { filter: 'type', sort: 'date' },
  ],
  // A chart's newest records: the chart summary's searches, and what a model's FHIR tool asks most.
  Observation: [
    { filter: 'patient', sort: 'date' },
    { filter: 'subject', sort: 'date' },
  ],
  Condition: [{ filter: 'patient', sort: 'recorded-date' }],
  MedicationRequest: [{ filter: 'patient', sort: 'authoredon' }],
  MedicationStatement: [{ filter: 'patient', sort: 'effective' }],
  AllergyIntolerance: [{ filter: 'patient', sort: 'date' }],
};

/**
 * Reference parameters whose rows are only those of their sorted lookup by this date parameter of the type. A
 * Communication has at most one `sent`, so each of its references has exactly one pair row (value: the reference,
 * extra: the date), which answers every search the plain row (value: the reference, extra: '') answered: reference
 * conditions read only the value. That is a fifth of a chat turn's index rows (bench/bytes-per-turn/).
 */
const PAIRED_ONLY: Readonly<Record<string, string>> = { Communication: 'sent' };

/** Changes when the rows a resource gets change for the same parameters, so that a file indexed before is rebuilt. */
const ROWS_VERSION = 'rows 3: presence rows, paired-only references';

/** The `extra` of a pair row whose resource has no sort value: after every date ascending, before every one descending. */
export const NO_SORT_VALUE = '~';

/** The `param` of the rows of a sorted lookup. */
export function sortedLookupParam(filter: string, sort: string): string {
  return `${filter}>${sort}`;
}

/** The `param` of the presence row of a parameter whose expression gives a value but no searchable one. */
export function presenceParam(code: string): string {
  return `${code}:present`;
}

/** A sorted lookup whose two parameters the index holds. */
interface SortedPair {
  readonly filter: IndexedParameter;
  readonly sort: IndexedParameter;
}

/** Search parameter types the index can hold. */
export type IndexedParameterType = 'reference' | 'token' | 'date';

/** One indexed search parameter of one resource type. */
export interface IndexedParameter {
  readonly code: string;
  /** The `param` of its value rows: its code, or the sorted lookup it is kept in (see {@link PAIRED_ONLY}). */
  readonly rowParam: string;
  readonly type: IndexedParameterType;
  readonly expression: string;
  readonly atom: FhirPathAtom;
}

/** One `search_index` row of a resource. */
export interface IndexRow {
  readonly param: string;
  readonly value: string;
  readonly extra: string;
}

const NO_PARAMETERS: ReadonlyMap<string, IndexedParameter> = new Map();

/**
 * The indexed parameters, resolved against the search parameters loaded when the store opens (a parameter that
 * is not defined then is not indexed, and its searches fall back to the matcher).
 */
export class SearchIndexSpec {
  readonly #spec: Readonly<Record<string, readonly string[]>>;
  readonly #sorted: Readonly<Record<string, readonly { readonly filter: string; readonly sort: string }[]>>;
  readonly #byType = new Map<string, ReadonlyMap<string, IndexedParameter>>();
  readonly #pairsByType = new Map<string, readonly SortedPair[]>();
  readonly #fingerprint: string;

  constructor(spec: Readonly<Record<string, readonly string[]>> = INDEXED_SEARCH_PARAMETERS, sorted = SORTED_LOOKUPS) {
    this.#spec = spec;
    this.#sorted = sorted;
    const described: string[] = [ROWS_VERSION, `*:${(spec['*'] ?? []).join(',')}`];
    for (const resourceType of Object.keys(spec).filter((key) => key !== '*').sort()) {
      for (const parameter of this.parametersFor(resourceType).values()) {
        described.push(`${resourceType}:${parameter.code}:${parameter.type}:${parameter.expression}:${parameter.rowParam}`);
      }
      for (const pair of this.#pairsOf(resourceType)) {
        described.push(`${resourceType}:${sortedLookupParam(pair.filter.code, pair.sort.code)}`);
      }
    }
    this.#fingerprint = described.join('\n');
  }

  /** Identifies what the index holds; a file whose recorded fingerprint differs is re-indexed on open. */
  get fingerprint(): string {
    return this.#fingerprint;
  }

  /** The indexed parameters of a resource type, by code. */
  parametersFor(resourceType: string): ReadonlyMap<string, IndexedParameter> {
    let parameters = this.#byType.get(resourceType);
    if (!parameters) {
      parameters = this.#resolve(resourceType);
      this.#byType.set(resourceType, parameters);
    }
    return parameters;
  }

  /** Every `param` an index row of any type may have: each is given its code in the store before any write. */
  rowParams(): string[] {
    const names = new Set<string>();
    for (const code of this.#spec['*'] ?? []) {
      names.add(code).add(presenceParam(code));
    }
    for (const resourceType of Object.keys(this.#spec).filter((key) => key !== '*')) {
      for (const parameter of this.parametersFor(resourceType).values()) {
        names.add(parameter.rowParam).add(presenceParam(parameter.code));
      }
      for (const pair of this.#pairsOf(resourceType)) {
        names.add(sortedLookupParam(pair.filter.code, pair.sort.code));
      }
    }
    return [...names].sort();
  }

  /** The `param` of the sorted lookup of `filter` by `sort` on the type, when the index keeps one. */
  sortedLookupFor(resourceType: string, filter: string, sort: string): string | undefined {
    return this.#pairsOf(resourceType).some((pair) => pair.filter.code === filter && pair.sort.code === sort) ? sortedLookupParam(filter, sort) : undefined;
  }

  /** The index rows of a resource, without duplicates. */
  rowsFor(resource: Resource): IndexRow[] {
    const parameters = this.parametersFor(resource.resourceType);
    if (parameters.size === 0) {
      return [];
    }
    const typedResource = [toTypedValue(resource)];
    const rows: IndexRow[] = [];
    const seen = new Set<string>();
    const add = (param: string, value: string, extra: string): void => {
      const key = `${param}\0${value}\0${extra}`;
      if (!seen.has(key)) {
        seen.add(key);
        rows.push({ param, value, extra });
      }
    };
    const valuesOf = new Map<string, [string, string][]>();
    for (const parameter of parameters.values()) {
      const { present, values } = indexValues(parameter, typedResource);
      valuesOf.set(parameter.code, values);
      // A paired-only parameter's rows are its sorted lookup's, added below.
      for (const [value, extra] of parameter.rowParam === parameter.code ? values : []) {
        add(parameter.code, value, extra);
      }
      if (present && values.length === 0) {
        add(presenceParam(parameter.code), '', '');
      }
    }
    for (const pair of this.#pairsOf(resource.resourceType)) {
      const sortValues = (valuesOf.get(pair.sort.code) ?? []).map(([start]) => start);
      for (const [reference] of valuesOf.get(pair.filter.code) ?? []) {
        for (const sortValue of sortValues.length > 0 ? sortValues : [NO_SORT_VALUE]) {
          add(sortedLookupParam(pair.filter.code, pair.sort.code), reference, sortValue);
        }
      }
    }
    return rows;
  }

  /** The sorted lookups of a type whose two parameters are indexed: a reference or a token, and a date (resolved once per type). */
  #pairsOf(resourceType: string): readonly SortedPair[] {
    let pairs = this.#pairsByType.get(resourceType);
    if (!pairs) {
      const parameters = this.parametersFor(resourceType);
      pairs = (this.#sorted[resourceType] ?? []).flatMap(({ filter, sort }) => {
        const filterParameter = parameters.get(filter);
        const sortParameter = parameters.get(sort);
        return (filterParameter?.type === 'reference' || filterParameter?.type === 'token') && sortParameter?.type === 'date'
          ? [{ filter: filterParameter, sort: sortParameter }]
          : [];
      });
      this.#pairsByType.set(resourceType, pairs);
    }
    return pairs;
  }

  #resolve(resourceType: string): ReadonlyMap<string, IndexedParameter> {
    const codes = [...(this.#spec['*'] ?? []), ...(this.#spec[resourceType] ?? [])];
    if (codes.length === 0) {
      return NO_PARAMETERS;
    }
    const parameters = new Map<string, IndexedParameter>();
    for (const code of codes) {
      const searchParameter = getSearchParameter(resourceType, code);
      const type = searchParameter?.type;
      const expression = searchParameter?.expression;
      if (!expression || (type !== 'reference' && type !== 'token' && type !== 'date')) {
        continue;
      }
      const atom = getParsedExpressionForResourceType(resourceType, expression);
      parameters.set(code, { code, rowParam: code, type, expression, atom });
    }
    const pairedSort = PAIRED_ONLY[resourceType];
    if (pairedSort !== undefined && parameters.get(pairedSort)?.type === 'date') {
      for (const { filter, sort } of this.#sorted[resourceType] ?? []) {
        const parameter = parameters.get(filter);
        if (sort === pairedSort && parameter?.type === 'reference') {
          parameters.set(filter, { ...parameter, rowParam: sortedLookupParam(filter, sort) });
        }
      }
    }
    return parameters;
  }
}

/** Whether the expression gives any value (what `:missing` asks), and the rows of its searchable values. */
function indexValues(parameter: IndexedParameter, typedResource: TypedValue[]): { present: boolean; values: [string, string][] } {
  let typedValues: TypedValue[];
  try {
    typedValues = evalFhirPathTyped(parameter.atom, typedResource);
  } catch {
    // A value the FHIRPath engine cannot evaluate is not searchable by the matcher either.
    return { present: false, values: [] };
  }
  return { present: typedValues.length > 0, values: searchableValues(parameter.type, typedValues) };
}

function searchableValues(type: IndexedParameterType, typedValues: TypedValue[]): [string, string][] {
  switch (type) {
    case 'reference':
      return convertToSearchableReferences(typedValues).map((reference) => [reference, '']);
    case 'token':
      return convertToSearchableTokens(typedValues).map((token) => [
        (token.value ?? '').toLowerCase(),
        (token.system ?? '').toLowerCase(),
      ]);
    case 'date':
      return safeDates(typedValues).map((period) => [period.start ?? '0000', period.end ?? '9999']);
  }
}

function safeDates(typedValues: TypedValue[]): ReturnType<typeof convertToSearchableDates> {
  try {
    return convertToSearchableDates(typedValues);
  } catch {
    return [];
  }
}
