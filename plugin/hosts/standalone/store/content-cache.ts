/**
 * The JSON of recently written and read versions, so that a conversation's history, read again at each turn, is
 * not inflated again each time. Keyed by the resource's row and its version id: a stored version's content never
 * changes (a rolled-back write's row may be given to another resource, but never with the same version id).
 */
import type { SQLOutputValue } from 'node:sqlite';
import { decodeContent } from './content-codec.ts';

/** About 3 MB of short chat messages: the last turns of a few dozen conversations. */
const MAX_ENTRIES = 2048;

export class DecodedContentCache {
  readonly #entries = new Map<string, string>();

  /** The JSON of a stored value of the version `versionId` of the row `pk`. */
  decode(pk: number, versionId: string, stored: SQLOutputValue | undefined): string {
    if (typeof stored === 'string') {
      return stored;
    }
    const key = `${pk}:${versionId}`;
    let json = this.#entries.get(key);
    if (json === undefined) {
      json = decodeContent(stored);
      this.remember(pk, versionId, json);
    }
    return json;
  }

  /** Keeps the JSON of a version just written. The oldest entry makes room. */
  remember(pk: number, versionId: string, json: string): void {
    if (this.#entries.size >= MAX_ENTRIES) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) {
        this.#entries.delete(oldest);
      }
    }
    this.#entries.set(`${pk}:${versionId}`, json);
  }
}
