/**
 * Re-identification of a streamed reply. A pseudonym or a date may arrive split across chunks (`[GIV`, `EN-1]`;
 * `2024-0`, `3-14`): the text from a point where one could still be beginning is held back until the next chunk
 * says, and the rest goes out re-identified at once. At most a date's or a pseudonym's length is held, so the
 * reply still streams; the end of the stream releases what is left.
 */
import type { Pseudonymizer } from './de-identify-text.ts';

/** The longest text held back: longer than any pseudonym or date form. */
const MAX_HELD = 32;

/** The re-identification of one streamed text. */
export class StreamReIdentifier {
  readonly #pseudonyms: Pseudonymizer;
  #pending = '';

  constructor(pseudonyms: Pseudonymizer) {
    this.#pseudonyms = pseudonyms;
  }

  /** Takes the model's next chunk; returns the re-identified text that may go out now ('' when all is held). */
  push(chunk: string): string {
    this.#pending += chunk;
    const cut = this.#safeCut(this.#pending);
    const ready = this.#pending.slice(0, cut);
    this.#pending = this.#pending.slice(cut);
    return this.#pseudonyms.reIdentify(ready);
  }

  /** The stream ended: everything still held, re-identified. */
  flush(): string {
    const rest = this.#pending;
    this.#pending = '';
    return this.#pseudonyms.reIdentify(rest);
  }

  /**
   * Where the text may be cut: before the first place in its tail a pseudonym or date may be beginning, a place
   * inside a whole one excepted (`2023.` in `November 25, 2023.`, `25.` in `2023-11-25.`): the whole one is matched
   * first, and the text is never cut inside it.
   */
  #safeCut(text: string): number {
    const spans = this.#pseudonyms.spans(text);
    for (let start = Math.max(0, text.length - MAX_HELD); start < text.length; start++) {
      const inside = spans.some(([first, end]) => first < start && start < end);
      if (!inside && beginsWord(text, start) && this.#pseudonyms.mayBegin(text.slice(start))) {
        return start;
      }
    }
    return text.length;
  }
}

/**
 * A pseudonym, a number or a word begins at `index`: it is not the middle of a word or a run of digits. After a
 * separator it may (`2023-11-25` in `2023-11-01/2023-11-25`); the later parts of a whole date are left to the caller.
 */
function beginsWord(text: string, index: number): boolean {
  const character = text[index];
  if (character === '[') {
    return true;
  }
  if (!/[A-Za-z0-9]/.test(character)) {
    return false;
  }
  return !/[A-Za-z0-9]/.test(text[index - 1] ?? '');
}
