/**
 * De-identification of one turn's text, and its inverse: the patient's identifiers become pseudonyms
 * (de-identify-terms.ts), the birth date the patient's age, dates near the turn's day their distance from it
 * (de-identify-present.ts), and every other date moves by the conversation's shift (de-identify-dates.ts). Applied
 * to all that goes to a model not cleared for patient data: the chart summary, FHIR tool results, the
 * conversation's history, the user's own prompt, the request's tools and options. The model's reply goes back
 * through `reIdentify` for the caller.
 *
 * Identifiers go first and dates second, and back in the reverse order, so an identifier that holds a date
 * (`2019-04-12-001`) is replaced whole and never half shifted. Results are kept for the turn: a FHIR tool loop sends
 * the same messages again at each step, and the reply's record asks what was sent.
 */
import type { Patient } from '@medplum/fhirtypes';
import { DateRewriter, mayBeginDate, shiftDate } from './de-identify-dates.ts';
import { birthDateOf, mayBeginMarker, TurnPresent } from './de-identify-present.ts';
import { mayBeginPseudonym, PatientTerms } from './de-identify-terms.ts';

/** What OpenAI (and Anthropic, for ids) allow in a function's name and a call's id. */
const NAME_CHARACTERS = /[^A-Za-z0-9_-]/g;
const MAX_NAME_LENGTH = 64;

/** Most distinct texts kept for one turn (a turn sends a few dozen: system messages, history, tool results). */
const MAX_REMEMBERED = 1000;

/** One conversation's de-identification of one patient. */
export class Pseudonymizer {
  /** The days dates move by (negative: back). */
  readonly dateShiftDays: number;
  readonly #terms: PatientTerms;
  readonly #present: TurnPresent;
  readonly #forward: DateRewriter;
  readonly #backward: DateRewriter;
  readonly #sent = new Map<string, string>();

  /** `now`: the turn's time, which dates near the present are written relative to. */
  constructor(patient: Patient, dateShiftDays: number, now: Date = new Date()) {
    this.dateShiftDays = dateShiftDays;
    this.#terms = new PatientTerms(patient);
    this.#present = new TurnPresent(now, birthDateOf(patient.birthDate));
    this.#forward = new DateRewriter(this.#present.outgoing(dateShiftDays));
    // A shifted date moves back; nothing the model writes is ambiguous enough to need more (the birth date and the
    // present reach it as markers).
    this.#backward = new DateRewriter((readings, ambiguous) => (ambiguous ? undefined : { date: shiftDate(readings[0], -dateShiftDays) }));
  }

  /** `text` as a model not cleared for patient data may see it. */
  deIdentify(text: string): string {
    if (text === '') {
      return text;
    }
    let sent = this.#sent.get(text);
    if (sent === undefined) {
      sent = this.#forward.rewrite(this.#present.replaceBirthDateVariants(this.#terms.replace(text.normalize('NFC'))));
      // Stryker disable next-line all: equivalent, how much is remembered changes memory and work, never the text sent.
      if (this.#sent.size < MAX_REMEMBERED) {
        // Stryker disable next-line all: as above.
        this.#sent.set(text, sent);
      }
    }
    return sent;
  }

  /**
   * A tool's result (JSON, as FHIR tools write it) de-identified: as text, and without photos (a Patient's `photo`
   * is a picture of the patient's face, which no pseudonym replaces).
   */
  deIdentifyToolResult(text: string): string {
    return this.deIdentify(withoutPhotos(text));
  }

  /**
   * Every string in `value` (tool definitions and their JSON schemas, the response format, metadata, extra request
   * fields) de-identified, the keys of its objects included: a schema's property or a metadata key may name the
   * patient as well as a value.
   */
  deIdentifyStrings<T>(value: T): T {
    if (typeof value === 'string') {
      return this.deIdentify(value) as T;
    }
    if (Array.isArray(value)) {
      return value.map((item: unknown) => this.deIdentifyStrings(item)) as T;
    }
    if (typeof value === 'object' && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [this.deIdentify(key), this.deIdentifyStrings(item)])) as T;
    }
    return value;
  }

  /**
   * A function's name or a call's id de-identified into what such a field takes (letters, digits, `_`, `-`, at most
   * 64): the pseudonyms without their brackets (`lookup_GIVEN-1FAMILY-1`). Unchanged when it holds nothing of the
   * patient's. A name is mapped back by the table of the names the request sent (de-identify-model.ts), never by
   * reading it.
   */
  deIdentifyName(name: string): string {
    const sent = this.deIdentify(name);
    return sent === name ? name : sent.replaceAll(/[[\]]/g, '').replaceAll(NAME_CHARACTERS, '_').slice(0, MAX_NAME_LENGTH);
  }

  /** A model's `text` with pseudonyms, markers and shifted dates mapped back; `json`: the text is JSON (a call's arguments). */
  reIdentify(text: string, json = false): string {
    return text === '' ? text : this.#terms.restore(this.#present.restore(this.#backward.rewrite(text)), json);
  }

  /** Where complete pseudonyms, markers and dates are in a model's text (start, end): a stream must not cut through one. */
  spans(text: string): [number, number][] {
    return [...this.#terms.spans(text), ...this.#present.spans(text), ...this.#backward.spans(text)];
  }

  /** Whether the end of a streamed text, from `tail` on, could still become a pseudonym, a marker or a date. */
  mayBegin(tail: string): boolean {
    return mayBeginPseudonym(tail) || mayBeginMarker(tail) || mayBeginDate(tail);
  }
}

/** JSON text without its `photo` fields; text that is not JSON, or has no photo, as it is. */
function withoutPhotos(text: string): string {
  if (!text.includes('"photo"')) {
    return text;
  }
  try {
    const value: unknown = JSON.parse(text);
    // As FHIR tools write their results: `<` and `>` escaped, so chart text cannot look like markup.
    return JSON.stringify(dropPhotos(value)).replaceAll('<', '\\u003c').replaceAll('>', '\\u003e');
  } catch {
    return text;
  }
}

function dropPhotos(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(dropPhotos);
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).filter(([key]) => key !== 'photo').map(([key, item]) => [key, dropPhotos(item)]));
  }
  return value;
}
