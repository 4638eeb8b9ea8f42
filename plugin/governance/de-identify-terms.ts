/**
 * The patient's own identifiers, read from the Patient resource we hold, and the pseudonyms that stand for them in
 * text sent to a model not cleared for patient data: name parts (`[GIVEN-1]`, `[FAMILY-1]`, `[NAME-1]` for other
 * names and the patient's contacts), identifiers (`[ID-1]`), phone numbers (`[PHONE-1]`), e-mail addresses
 * (`[EMAIL-1]`), other contact points (`[CONTACT-1]`), address lines and texts (`[ADDRESS-1]`), cities and
 * districts (`[CITY-1]`), postal codes (`[POSTCODE-1]`) and the Patient's id (`[PATIENT-1]`).
 *
 * Matching is generous where people write things differently: names and addresses ignore case and accents
 * (`lopez` finds López); identifiers and postal codes ignore separators (`123-45-6789` finds 123456789); a phone
 * number is found with or without its country code, in any grouping. A pseudonym in lower case (`[given-1]`)
 * stands for the value in lower case, so a name that is also a word (`May`, `Rose`) comes back as it was written.
 */
import type { Address, ContactPoint, HumanName, Patient } from '@medplum/fhirtypes';

/** What a pseudonym stands for. */
type TermKind = 'GIVEN' | 'FAMILY' | 'NAME' | 'ID' | 'PHONE' | 'EMAIL' | 'CONTACT' | 'ADDRESS' | 'CITY' | 'POSTCODE' | 'PATIENT';

interface Term {
  readonly kind: TermKind;
  /** The value as the record holds it: what the pseudonym is re-identified as. */
  readonly value: string;
  /** A regular expression source matched against folded text (lower case, no accents). */
  readonly pattern: string;
}

const LETTER_OR_DIGIT = String.raw`[\p{L}\p{N}]`;
const SEPARATORS = String.raw`[\s()./-]*`;
/** Shortest name part, identifier, line, ... taken as a term: shorter ones would match everyday words and numbers. */
const MIN_NAME = 2;
const MIN_NAME_WORD = 3;
const MIN_IDENTIFIER = 4;
const MIN_PHONE_DIGITS = 7;
const PSEUDONYM = /\[([A-Za-z]+)-(\d{1,4})\]/g;

/** The patient's identifiers and their pseudonyms. */
export class PatientTerms {
  readonly #pattern: RegExp | undefined;
  /** The term of each capturing group of `#pattern`, in order. */
  readonly #groups: { readonly token: string; readonly term: Term }[];
  /** `GIVEN-1` → `Maria`. */
  readonly #values = new Map<string, string>();

  constructor(patient: Patient) {
    const numbered = numberTerms(termsOf(patient));
    this.#groups = numbered.sort((a, b) => b.term.value.length - a.term.value.length);
    for (const { token, term } of numbered) {
      this.#values.set(token, term.value);
    }
    this.#pattern = this.#groups.length > 0 ? new RegExp(this.#groups.map(({ term }) => `(${term.pattern})`).join('|'), 'gu') : undefined;
  }

  /** `text` with each of the patient's identifiers replaced by its pseudonym. */
  replace(text: string): string {
    const pattern = this.#pattern;
    if (!pattern) {
      return text;
    }
    const folded = fold(text);
    let result = '';
    let copied = 0;
    for (const match of folded.matchAll(pattern)) {
      const group = match.findIndex((value, index) => index > 0 && value !== undefined);
      const { token, term } = this.#groups[group - 1];
      const surface = text.slice(match.index, match.index + match[0].length);
      // `may` for the name May: the pseudonym says it was written in lower case (values held in lower case need not).
      const lowerCase = surface === surface.toLowerCase() && surface !== surface.toUpperCase() && term.value !== term.value.toLowerCase();
      result += `${text.slice(copied, match.index)}[${lowerCase ? token.toLowerCase() : token}]`;
      copied = match.index + match[0].length;
    }
    return copied === 0 ? text : result + text.slice(copied);
  }

  /** `text` with each pseudonym replaced by what it stands for; `json`: the values escaped for a JSON string. */
  restore(text: string, json = false): string {
    if (!text.includes('[')) {
      return text;
    }
    return text.replace(PSEUDONYM, (pseudonym: string, kind: string, number: string) => {
      const value = this.#values.get(`${kind.toUpperCase()}-${number}`);
      if (value === undefined) {
        return pseudonym;
      }
      const written = kind === kind.toLowerCase() ? value.toLowerCase() : value;
      return json ? JSON.stringify(written).slice(1, -1) : written;
    });
  }

  /** Where complete pseudonyms are in `text` (start, end). */
  spans(text: string): [number, number][] {
    return [...text.matchAll(PSEUDONYM)].map((match) => [match.index, match.index + match[0].length]);
  }
}

/** Whether `tail` (the end of a streamed text) could still become a pseudonym as more text arrives. */
export function mayBeginPseudonym(tail: string): boolean {
  return /^\[[A-Za-z]{0,12}(?:-\d{0,4})?$/.test(tail);
}

/** Every term of the patient's record, before numbering. */
function termsOf(patient: Patient): Term[] {
  const terms: Term[] = [];
  for (const name of patient.name ?? []) {
    terms.push(...nameTerms(name, 'GIVEN', 'FAMILY'));
  }
  for (const identifier of patient.identifier ?? []) {
    terms.push(...looseTerm('ID', identifier.value, MIN_IDENTIFIER));
  }
  terms.push(...(patient.telecom ?? []).flatMap(contactPointTerms));
  terms.push(...(patient.address ?? []).flatMap(addressTerms));
  for (const contact of patient.contact ?? []) {
    terms.push(...(contact.name ? nameTerms(contact.name, 'NAME', 'NAME') : []));
    terms.push(...(contact.telecom ?? []).flatMap(contactPointTerms));
    terms.push(...(contact.address ? addressTerms(contact.address) : []));
  }
  if (patient.id) {
    terms.push({ kind: 'PATIENT', value: patient.id, pattern: bounded(literal(fold(patient.id))) });
  }
  return terms;
}

function nameTerms(name: HumanName, givenKind: TermKind, familyKind: TermKind): Term[] {
  const whole = [...(name.given ?? []).map((value) => ({ kind: givenKind, value })), ...(name.family ? [{ kind: familyKind, value: name.family }] : [])];
  // Each part of a compound name on its own too (García-López, de la Cruz, Mary Ann), if it is not a short particle.
  const parts = whole.flatMap(({ kind, value }) => {
    const words = value.split(/[\s-]+/);
    return words.length > 1 ? words.filter((word) => word.length >= MIN_NAME_WORD).map((word) => ({ kind, value: word })) : [];
  });
  const other = (name.text ?? '').split(/[\s,]+/).filter((word) => word.length >= MIN_NAME_WORD).map((value) => ({ kind: 'NAME' as const, value }));
  return [...whole, ...parts, ...other].filter(({ value }) => value.trim().length >= MIN_NAME).map(({ kind, value }) => ({ kind, value: value.trim(), pattern: bounded(words(value)) }));
}

function contactPointTerms(point: ContactPoint): Term[] {
  const value = point.value?.trim();
  if (!value) {
    return [];
  }
  if (point.system === 'phone' || point.system === 'fax' || point.system === 'sms' || point.system === 'pager') {
    return phoneTerm(value);
  }
  const kind = point.system === 'email' || /^[^\s@]+@[^\s@]+$/.test(value) ? 'EMAIL' : 'CONTACT';
  return [{ kind, value, pattern: String.raw`(?<![\p{L}\p{N}._%+-])${literal(fold(value))}(?!${LETTER_OR_DIGIT})` }];
}

function addressTerms(address: Address): Term[] {
  const text = (value: string | undefined, kind: TermKind, minimum: number): Term[] =>
    value && value.trim().length >= minimum ? [{ kind, value: value.trim(), pattern: bounded(words(value, String.raw`[\s,]+`)) }] : [];
  return [
    ...text(address.text, 'ADDRESS', 4),
    ...(address.line ?? []).flatMap((line) => text(line, 'ADDRESS', 4)),
    ...text(address.city, 'CITY', 3),
    ...text(address.district, 'CITY', 3),
    ...looseTerm('POSTCODE', address.postalCode, 3),
  ];
}

/** A phone number by its digits, with or without a country code or trunk prefix, in any grouping. */
function phoneTerm(value: string): Term[] {
  const digits = value.replace(/\D/g, '');
  if (digits.length < MIN_PHONE_DIGITS) {
    return [];
  }
  const core = digits.length > 10 ? digits.slice(-10) : digits;
  const pattern = String.raw`(?<![\p{L}\p{N}+])(?:\+?\d{1,3}${SEPARATORS})?\(?${[...core].join(SEPARATORS)}(?!\p{N})`;
  return [{ kind: 'PHONE', value, pattern }];
}

/** An identifier or a postal code by its letters and digits, whatever separates them. */
function looseTerm(kind: TermKind, value: string | undefined, minimum: number): Term[] {
  const characters = [...fold(value ?? '')].filter((character) => /[\p{L}\p{N}]/u.test(character));
  if (!value || characters.length < minimum) {
    return [];
  }
  return [{ kind, value: value.trim(), pattern: bounded(characters.map(literal).join(SEPARATORS)) }];
}

/** Pseudonyms numbered by kind, in the record's order; one per distinct value (ignoring case and accents). */
function numberTerms(terms: readonly Term[]): { token: string; term: Term }[] {
  const tokenOfValue = new Map<string, string>();
  const counts = new Map<TermKind, number>();
  const seenPatterns = new Set<string>();
  const numbered: { token: string; term: Term }[] = [];
  for (const term of terms) {
    const key = fold(term.value).replace(/\s+/g, ' ');
    let token = tokenOfValue.get(key);
    if (token === undefined) {
      const count = (counts.get(term.kind) ?? 0) + 1;
      counts.set(term.kind, count);
      token = `${term.kind}-${count}`;
      tokenOfValue.set(key, token);
    }
    if (!seenPatterns.has(term.pattern)) {
      seenPatterns.add(term.pattern);
      numbered.push({ token, term });
    }
  }
  return numbered;
}

/** Words of a value, folded, any run of whitespace (or `between`) matching any other. */
function words(value: string, between = String.raw`\s+`): string {
  return fold(value.trim())
    .split(/[\s,]+/)
    .filter((word) => word !== '')
    .map(literal)
    .join(between);
}

/** `source` not inside a longer word or number. */
function bounded(source: string): string {
  return `(?<!${LETTER_OR_DIGIT})${source}(?!${LETTER_OR_DIGIT})`;
}

/** `text` as a regular expression; a quote also matches as JSON escapes it (`\"`), since chart text is often JSON. */
function literal(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&').replaceAll('"', String.raw`\\?"`);
}

const foldedCharacters = new Map<string, string>();

/**
 * Lower case without accents, one UTF-16 unit for one, so a match in the folded text is at the same place in the
 * original (text is NFC-normalised before it is folded).
 */
export function fold(text: string): string {
  if (/^[\x00-\x7f]*$/.test(text)) {
    return text.toLowerCase();
  }
  let result = '';
  for (const unit of text) {
    if (unit.length !== 1) {
      result += unit;
      continue;
    }
    let folded = foldedCharacters.get(unit);
    if (folded === undefined) {
      const base = unit.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
      folded = base.length === 1 ? base : unit;
      if (foldedCharacters.size < 10_000) {
        foldedCharacters.set(unit, folded);
      }
    }
    result += folded;
  }
  return result;
}
