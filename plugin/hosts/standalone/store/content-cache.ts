/**
 * The JSON of recently written and read versions, so that a conversation's history and a patient's chart, read
 * again at each turn, are not inflated again each time. Keyed by the resource's row and its version id: a stored
 * version's content never changes (a rolled-back write's row may be given to another resource, but never with the
 * same version id).
 *
 * Bounded by the characters it holds, least recently used out first: a turn reads its conversation's newest page
 * (up to 50 messages) and, about a patient, the chart, so the working set is the pages of the conversations in use.
 *
 * Once full, a version read (not written) is kept only at one miss in ADMIT_EVERY_WHEN_FULL. When the pages in use
 * outgrow the cache, a least-recently-used cache that keeps every miss hits nothing: each page read pushes out what
 * the next turns would read, and every version it inflated is held just long enough to be promoted and then evicted,
 * garbage for a major collection. Keeping few of the misses leaves what the cache holds in place for as long as it is
 * read (about as many pages hit as fit); a working set that fits still comes in within a few reads.
 */
import type { SQLOutputValue } from 'node:sqlite';
import { LRUCache } from 'lru-cache';
import { decodeContent } from './content-codec.ts';

/**
 * 4 M characters: the newest pages of some fifty conversations of 50 short messages. Measured as the process's
 * resident memory, 16 M characters of such JSON took 45 to 60 MB, and took the host with 1,000 streams open over
 * bench target 4's 400 MB; 4 M take about a quarter of that, near the 2,048 versions kept before.
 */
export const DEFAULT_MAX_CHARACTERS = 4 * 1024 * 1024;

/** Once the cache is full, one version read in this many that it does not hold is kept. */
export const ADMIT_EVERY_WHEN_FULL = 8;

export class DecodedContentCache {
  // lru-cache keeps its order in arrays of indices: a Map used as the queue (delete and set again on every hit) left
  // holes that each eviction walked past from the front, about 240 µs a turn of the host's CPU (bench scenario 14).
  readonly #entries: LRUCache<string, string>;
  readonly #maxCharacters: number;
  #missesWhenFull = 0;

  constructor(maxCharacters = DEFAULT_MAX_CHARACTERS) {
    this.#maxCharacters = maxCharacters;
    this.#entries = new LRUCache<string, string>({
      maxSize: maxCharacters,
      // A version larger than a quarter of the bound would push out a quarter of the working set for one read.
      maxEntrySize: maxCharacters / 4,
      sizeCalculation: (json) => Math.max(1, json.length),
    });
  }

  /** The JSON of a stored value of the version `versionId` of the row `pk`. */
  decode(pk: number, versionId: string, stored: SQLOutputValue | undefined): string {
    if (typeof stored === 'string') {
      return stored;
    }
    const key = `${pk}:${versionId}`;
    const json = this.#entries.get(key);
    if (json !== undefined) {
      return json;
    }
    const decoded = decodeContent(stored);
    if (this.#admits(decoded)) {
      this.#entries.set(key, decoded);
    }
    return decoded;
  }

  /** Whether a version read is kept: while there is room, and then one miss in ADMIT_EVERY_WHEN_FULL. */
  #admits(json: string): boolean {
    if (this.#entries.calculatedSize + json.length <= this.#maxCharacters) {
      return true;
    }
    this.#missesWhenFull = (this.#missesWhenFull + 1) % ADMIT_EVERY_WHEN_FULL;
    return this.#missesWhenFull === 0;
  }

  /** Keeps the JSON of a version just written or read; the least recently used make room. */
  remember(pk: number, versionId: string, json: string): void {
    this.#entries.set(`${pk}:${versionId}`, json);
  }
}
