/**
 * The patient's own identifiers, read from the Patient resource we hold, and the pseudonyms that stand for them in
 * text sent to a model not cleared for patient data: name parts (`[GIVEN-1]`, `[FAMILY-1]`, `[NAME-1]` for other
 * names and the patient's contacts), identifiers (`[ID-1]`), phone numbers (`[PHONE-1]`), e-mail addresses
 * (`[EMAIL-1]`), other contact points (`[CONTACT-1]`), address lines and texts (`[ADDRESS-1]`), cities and
 * districts (`[CITY-1]`), postal codes (`[POSTCODE-1]`) and the Patient's id (`[PATIENT-1]`).
 *
 * Matching is generous where people write things differently: names and addresses ignore case and accents
 * (`lopez` finds López); a name is also found run together with another of the patient's (`MariaLopez`), after
 * the initials of her given names (`mlopez`) and before digits (`lopez58`), as user names and e-mail addresses
 * write them; an address line is found with its street words abbreviated or not (`12 Elm St` for 12 Elm Street)
 * and without its house number; identifiers, postal codes and the Patient's id ignore separators
 * (`123-45-6789` finds 123456789, the id without its hyphens), an identifier with letters is also found by its
 * digits alone (`004512` of MRN-004512), and a number is found next to letters (`SSN123456789`); a phone number is
 * found with or without its country code, in any grouping. A pseudonym in lower case (`[given-1]`) stands for the
 * value in lower case, so a name that is also a word (`May`, `Rose`) comes back as it was written.
 */
import type { Address, ContactPoint, HumanName, Patient } from '@medplum/fhirtypes';

/** What a pseudonym stands for. */
type TermKind = 'GIVEN' | 'FAMILY' | 'NAME' | 'ID' | 'PHONE' | 'EMAIL' | 'CONTACT' | 'ADDRESS' | 'CITY' | 'POSTCODE' | 'PATIENT';

interface Term {
  readonly kind: TermKind;
  /** The value as the record holds it: what the pseudonym is re-identified as. */
  readonly value: string;
  /** A regular expression source matched against folded text (lower case, no accents), without its edges. */
  readonly core: string;
  /**
   * What may stand next to it: `word`, no letter or digit; `number`, no digit next to a digit end (letters may
   * touch: `SSN123456789`); `name`, as a word, or next to another of the patient's names, after her initials or
   * before digits; `none`, the core says it itself.
   */
  readonly edges: 'word' | 'number' | 'name' | 'none';
}

const LETTER_OR_DIGIT = String.raw`[\p{L}\p{N}]`;
const SEPARATORS = String.raw`[\s()./-]*`;
/** Shortest name part, identifier, line, ... taken as a term: shorter ones would match everyday words and numbers. */
const MIN_NAME = 2;
const MIN_NAME_WORD = 3;
const MIN_IDENTIFIER = 4;
const MIN_IDENTIFIER_DIGITS = 5;
const MIN_PHONE_DIGITS = 7;
/**
 * Words of an address written in full or abbreviated (USPS and common British forms): each word of a line matches
 * every word of its group.
 */
const ADDRESS_WORDS: readonly (readonly string[])[] = [
  ['street', 'st', 'str'],
  ['avenue', 'ave', 'av'],
  ['road', 'rd'],
  ['boulevard', 'blvd'],
  ['drive', 'dr'],
  ['lane', 'ln'],
  ['court', 'ct'],
  ['place', 'pl'],
  ['square', 'sq'],
  ['terrace', 'ter', 'terr'],
  ['highway', 'hwy'],
  ['parkway', 'pkwy'],
  ['circle', 'cir'],
  ['crescent', 'cres'],
  ['heights', 'hts'],
  ['apartment', 'apt'],
  ['suite', 'ste'],
  ['building', 'bldg'],
  ['floor', 'fl'],
  ['north', 'n'],
  ['south', 's'],
  ['east', 'e'],
  ['west', 'w'],
  ['mount', 'mt'],
  ['saint', 'st'],
  ['fort', 'ft'],
];
const ADDRESS_VARIANTS: ReadonlyMap<string, readonly string[]> = new Map(
  ADDRESS_WORDS.flatMap((group) => group.map((word) => [word, [...new Set(ADDRESS_WORDS.filter((other) => other.includes(word)).flat())]] as const))
);
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
    const edges = nameEdges(numbered.map(({ term }) => term), initialsOf(patient));
    this.#pattern = this.#groups.length > 0 ? new RegExp(this.#groups.map(({ term }) => `(${edges(term)})`).join('|'), 'gu') : undefined;
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
  // After every whole identifier, so their pseudonyms are numbered as before.
  terms.push(...(patient.identifier ?? []).flatMap((identifier) => digitsTerms(identifier.value)));
  terms.push(...(patient.telecom ?? []).flatMap(contactPointTerms));
  terms.push(...(patient.address ?? []).flatMap(addressTerms));
  for (const contact of patient.contact ?? []) {
    terms.push(...(contact.name ? nameTerms(contact.name, 'NAME', 'NAME') : []));
    terms.push(...(contact.telecom ?? []).flatMap(contactPointTerms));
    terms.push(...(contact.address ? addressTerms(contact.address) : []));
  }
  // With or without its hyphens, in any case.
  terms.push(...looseTerm('PATIENT', patient.id, 1, 'word'));
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
  return [...whole, ...parts, ...other]
    .filter(({ value }) => value.trim().length >= MIN_NAME)
    .map(({ kind, value }) => ({ kind, value: value.trim(), core: words(value), edges: value.trim().length >= MIN_NAME_WORD ? 'name' : 'word' }));
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
  return [{ kind, value, core: String.raw`(?<![\p{L}\p{N}._%+-])${literal(fold(value))}(?!${LETTER_OR_DIGIT})`, edges: 'none' }];
}

function addressTerms(address: Address): Term[] {
  const text = (value: string | undefined, kind: TermKind, minimum: number): Term[] =>
    value && value.trim().length >= minimum ? [{ kind, value: value.trim(), core: addressWords(value), edges: 'word' }] : [];
  return [
    ...text(address.text, 'ADDRESS', 4),
    ...(address.line ?? []).flatMap((line) => [...text(line, 'ADDRESS', 4), ...text(withoutHouseNumber(line), 'ADDRESS', 4)]),
    ...text(address.city, 'CITY', 3),
    ...text(address.district, 'CITY', 3),
    ...looseTerm('POSTCODE', address.postalCode, 3, 'number'),
  ];
}

/** `Elm Street` of `12 Elm Street`: a line's street on its own, when a house number comes first and two words follow. */
function withoutHouseNumber(line: string): string | undefined {
  const words = line.trim().split(/[\s,]+/);
  return words.length >= 3 && /^\d+[a-z]?$/i.test(words[0]) ? words.slice(1).join(' ') : undefined;
}

/** An address's words, folded, each matching its abbreviations and full forms, whitespace or commas (and a period) between. */
function addressWords(value: string): string {
  return fold(value.trim())
    .split(/[\s,]+/)
    .filter((word) => word !== '')
    .map((word) => {
      const variants = ADDRESS_VARIANTS.get(word.replace(/\.$/, ''));
      return variants ? `(?:${variants.join('|')})` : literal(word.replace(/\.$/, ''));
    })
    // An abbreviation's period between words (`St. Mary`); one at the end is the sentence's.
    .join(String.raw`\.?[\s,]+`);
}

/** A phone number by its digits, with or without a country code or trunk prefix, in any grouping. */
function phoneTerm(value: string): Term[] {
  const digits = value.replace(/\D/g, '');
  if (digits.length < MIN_PHONE_DIGITS) {
    return [];
  }
  const core = digits.length > 10 ? digits.slice(-10) : digits;
  const pattern = String.raw`(?<![\p{L}\p{N}+])(?:\+?\d{1,3}${SEPARATORS})?\(?${[...core].join(SEPARATORS)}(?!\p{N})`;
  return [{ kind: 'PHONE', value, core: pattern, edges: 'none' }];
}

/** An identifier, a postal code or an id by its letters and digits, whatever separates them. */
function looseTerm(kind: TermKind, value: string | undefined, minimum: number, edges: 'word' | 'number' = 'number'): Term[] {
  const characters = [...fold(value ?? '')].filter((character) => /[\p{L}\p{N}]/u.test(character));
  if (!value || characters.length < minimum) {
    return [];
  }
  return [{ kind, value: value.trim(), core: characters.map(literal).join(SEPARATORS), edges }];
}

/** The digits of an identifier that also has letters (`004512` of MRN-004512), when there are enough of them. */
function digitsTerms(value: string | undefined): Term[] {
  const trimmed = value?.trim() ?? '';
  if (!/\p{L}/u.test(trimmed)) {
    return [];
  }
  return (trimmed.match(/\d+/g) ?? []).filter((digits) => digits.length >= MIN_IDENTIFIER_DIGITS).map((digits) => ({ kind: 'ID', value: digits, core: digits, edges: 'number' }));
}

/** The first letters of the patient's given names, folded: `mlopez` is Maria Lopez's user name. */
function initialsOf(patient: Patient): string[] {
  const given = (patient.name ?? []).flatMap((name) => name.given ?? []);
  return [...new Set(given.map((name) => fold(name.trim()).charAt(0)).filter((initial) => /\p{L}/u.test(initial)))];
}

/**
 * How each term's core is bounded in the text. A name of at least three letters may touch another of the
 * patient's names (`MariaLopez`), a family name may follow one or two of her initials (`mlopez`), and any may be
 * followed by digits (`lopez58`): how user names and e-mail addresses are made. The boundary before a core is
 * checked after the core matched (a look-behind over the core), so the search costs no more where no name is.
 */
function nameEdges(terms: readonly Term[], initials: readonly string[]): (term: Term) => string {
  const names = terms.filter((term) => term.edges === 'name').map((term) => term.core);
  const otherName = names.length > 0 ? `(?:${names.join('|')})` : undefined;
  const initial = initials.length > 0 ? `(?<!${LETTER_OR_DIGIT})[${initials.map(literal).join('')}]{1,2}` : undefined;
  return (term) => {
    switch (term.edges) {
      case 'none':
        return term.core;
      case 'word':
        return bounded(term.core);
      case 'number':
        return `${/^\\?\d/.test(term.core) ? String.raw`(?<!\p{N})` : `(?<!${LETTER_OR_DIGIT})`}${term.core}${/\d$/.test(term.core) ? String.raw`(?!\p{N})` : `(?!${LETTER_OR_DIGIT})`}`;
      case 'name': {
        const before = [`(?<!${LETTER_OR_DIGIT})`, ...(otherName ? [otherName] : []), ...(initial && term.kind === 'FAMILY' ? [initial] : [])];
        const after = [String.raw`(?!\p{L})`, ...(otherName ? [`(?=${otherName})`] : [])];
        return `${term.core}(?<=(?:${before.join('|')})${term.core})(?:${after.join('|')})`;
      }
    }
  };
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
    const pattern = `${term.edges}:${term.core}`;
    if (!seenPatterns.has(pattern)) {
      seenPatterns.add(pattern);
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
