/**
 * The `search_index` rows of a chat Communication, read straight from its fields. The store's own
 * `SearchIndexSpec.rowsFor` evaluates FHIRPath (about 120 µs a resource, two minutes for a million); these are
 * the same rows for the shapes the chat route writes, and {@link IndexRowChecker} compares the two on samples so
 * that a change to the index or the builders fails the seed instead of skewing it.
 */
import type { Communication } from '@medplum/fhirtypes';
import { NO_SORT_VALUE, sortedLookupParam, type IndexRow, type SearchIndexSpec } from '../../plugin/hosts/standalone/store/search-index.ts';

/** The index rows of a Communication built by the chat route's builders (no identifier, one coding per category). */
export function communicationIndexRows(resource: Communication): IndexRow[] {
  const rows: IndexRow[] = [];
  const reference = (param: string, value: string | undefined): void => {
    if (value) {
      rows.push({ param, value, extra: '' });
    }
  };
  for (const compartment of resource.meta?.compartment ?? []) {
    reference('_compartment', compartment.reference);
  }
  // part-of, subject, sender and recipient have only their sorted lookup's rows (search-index.ts, PAIRED_ONLY).
  for (const concept of resource.category ?? []) {
    for (const coding of concept.coding ?? []) {
      // Token search also matches a coding's display, as text.
      if (coding.display) {
        rows.push({ param: 'category', value: coding.display.toLowerCase(), extra: '' });
      }
      rows.push({ param: 'category', value: (coding.code ?? '').toLowerCase(), extra: (coding.system ?? '').toLowerCase() });
    }
  }
  if (resource.sent) {
    rows.push({ param: 'sent', value: resource.sent, extra: resource.sent });
  }
  for (const answered of resource.inResponseTo ?? []) {
    reference('in-response-to', answered.reference);
  }
  rows.push({ param: 'status', value: resource.status.toLowerCase(), extra: '' });
  for (const concept of resource.medium ?? []) {
    for (const coding of concept.coding ?? []) {
      rows.push({ param: 'medium', value: (coding.code ?? '').toLowerCase(), extra: (coding.system ?? '').toLowerCase() });
    }
  }
  // The sorted lookups by sent: a conversation's messages, and the conversations by category, sender and subject.
  const sorted = (filter: string, value: string | undefined): void => {
    if (value) {
      rows.push({ param: sortedLookupParam(filter, 'sent'), value, extra: resource.sent ?? NO_SORT_VALUE });
    }
  };
  for (const part of resource.partOf ?? []) {
    sorted('part-of', part.reference);
  }
  for (const row of rows.filter((candidate) => candidate.param === 'category')) {
    sorted('category', row.value);
  }
  sorted('sender', resource.sender?.reference);
  for (const recipient of resource.recipient ?? []) {
    sorted('recipient', recipient.reference);
  }
  sorted('subject', resource.subject?.reference);
  return rows;
}

/** Compares {@link communicationIndexRows} with the store's own rows on every n-th resource; throws on a difference. */
export class IndexRowChecker {
  readonly #spec: SearchIndexSpec;
  readonly #every: number;
  #seen = 0;
  checked = 0;

  constructor(spec: SearchIndexSpec, every: number) {
    this.#spec = spec;
    this.#every = every;
  }

  /** `content` is the stored JSON, as the store would index it. */
  check(content: string, rows: readonly IndexRow[]): void {
    if (this.#seen++ % this.#every !== 0) {
      return;
    }
    const resource = JSON.parse(content) as Communication;
    const expected = this.#spec.rowsFor(resource).map(describe).sort();
    const actual = rows.map(describe).sort();
    if (JSON.stringify(expected) !== JSON.stringify(actual)) {
      throw new Error(`Bulk index rows differ from the store's for ${resource.id}: expected ${expected.join('; ')}, built ${actual.join('; ')}`);
    }
    this.checked++;
  }
}

function describe(row: IndexRow): string {
  return `${row.param}|${row.value}|${row.extra}`;
}
