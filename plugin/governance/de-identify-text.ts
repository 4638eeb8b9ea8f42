/**
 * De-identification of one turn's text, and its inverse: the patient's identifiers become pseudonyms
 * (de-identify-terms.ts) and every date moves by the conversation's shift (de-identify-dates.ts). Applied to all
 * that goes to a model not cleared for patient data: the chart summary, FHIR tool results, the conversation's
 * history, the user's own prompt. The model's reply goes back through `reIdentify` for the caller.
 *
 * Identifiers go first and dates second, and back in the reverse order, so an identifier that holds a date
 * (`2019-04-12-001`) is replaced whole and never half shifted. Results are kept for the turn: a FHIR tool loop sends
 * the same messages again at each step, and the reply's record asks what was sent.
 */
import type { Patient } from '@medplum/fhirtypes';
import { DateShifter, mayBeginDate, parseIsoDate, shiftDate } from './de-identify-dates.ts';
import { mayBeginPseudonym, PatientTerms } from './de-identify-terms.ts';

/** Most distinct texts kept for one turn (a turn sends a few dozen: system messages, history, tool results). */
const MAX_REMEMBERED = 1000;

/** One conversation's de-identification of one patient. */
export class Pseudonymizer {
  /** The days dates move by (negative: back). */
  readonly dateShiftDays: number;
  readonly #terms: PatientTerms;
  readonly #forward: DateShifter;
  readonly #backward: DateShifter;
  readonly #sent = new Map<string, string>();

  constructor(patient: Patient, dateShiftDays: number) {
    this.dateShiftDays = dateShiftDays;
    this.#terms = new PatientTerms(patient);
    const birthDate = parseIsoDate(patient.birthDate);
    this.#forward = new DateShifter(dateShiftDays, birthDate);
    this.#backward = new DateShifter(-dateShiftDays, birthDate && shiftDate(birthDate, dateShiftDays));
  }

  /** `text` as a model not cleared for patient data may see it. */
  deIdentify(text: string): string {
    if (text === '') {
      return text;
    }
    let sent = this.#sent.get(text);
    if (sent === undefined) {
      sent = this.#forward.shift(this.#terms.replace(text.normalize('NFC')));
      if (this.#sent.size < MAX_REMEMBERED) {
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

  /** Every string in `value` (tool definitions, extra request fields) de-identified. */
  deIdentifyStrings<T>(value: T): T {
    if (typeof value === 'string') {
      return this.deIdentify(value) as T;
    }
    if (Array.isArray(value)) {
      return value.map((item: unknown) => this.deIdentifyStrings(item)) as T;
    }
    if (typeof value === 'object' && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, this.deIdentifyStrings(item)])) as T;
    }
    return value;
  }

  /** A model's `text` with pseudonyms and shifted dates mapped back; `json`: the text is JSON (a call's arguments). */
  reIdentify(text: string, json = false): string {
    return text === '' ? text : this.#terms.restore(this.#backward.shift(text), json);
  }

  /** Where complete pseudonyms and dates are in a model's text (start, end): a stream must not cut through one. */
  spans(text: string): [number, number][] {
    return [...this.#terms.spans(text), ...this.#backward.spans(text)];
  }

  /** Whether the end of a streamed text, from `tail` on, could still become a pseudonym or a date. */
  mayBegin(tail: string): boolean {
    return mayBeginPseudonym(tail) || mayBeginDate(tail);
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
