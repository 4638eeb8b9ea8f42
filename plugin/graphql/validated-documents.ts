/**
 * Documents Medplum's handler has already validated, by their exact text, each with what fhirgate keeps to run it
 * again (`fast-graphql-path.ts`). graphql-js validation is a pure function of the schema and the document, and
 * Medplum's schema is fixed once built, so a document that passed once passes every time: devices send the same
 * few documents (the device guard writes each one's checked values as variables, so the text does not change with
 * the values). Only documents Medplum answered without a syntax or validation error are ever kept. The cache is
 * bounded: the least recently used document goes first.
 */

/** How many distinct documents are kept by default. */
export const DEFAULT_MAX_VALIDATED_DOCUMENTS = 256;

/** A bounded, least-recently-used map from a document's text to what is kept for it. */
export class ValidatedDocuments<Entry> {
  readonly #maxEntries: number;
  // A Map keeps insertion order: re-inserting on each hit makes its first key the least recently used.
  readonly #entries = new Map<string, Entry>();

  constructor(maxEntries: number = DEFAULT_MAX_VALIDATED_DOCUMENTS) {
    this.#maxEntries = Math.max(1, maxEntries);
  }

  /** What is kept for `query`, now the most recently used; undefined when it is not kept. */
  get(query: string): Entry | undefined {
    const known = this.#entries.get(query);
    if (known !== undefined) {
      this.#entries.delete(query);
      this.#entries.set(query, known);
    }
    return known;
  }

  /** Keeps `entry` for `query` (a document Medplum validated), dropping the least recently used beyond the bound. */
  remember(query: string, entry: Entry): void {
    this.#entries.delete(query);
    this.#entries.set(query, entry);
    if (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) {
        this.#entries.delete(oldest.value);
      }
    }
  }

  /** How many documents are kept. */
  get size(): number {
    return this.#entries.size;
  }

  /** True when `query` is kept (without touching its recency). */
  has(query: string): boolean {
    return this.#entries.has(query);
  }
}
