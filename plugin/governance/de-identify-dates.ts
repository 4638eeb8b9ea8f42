/**
 * Dates shifted per conversation, for turns sent de-identified to a model not cleared for patient data. Every date
 * of a conversation moves by the same number of days, so intervals (age at a visit, weeks between two labs) stay
 * true while the calendar dates do not reach the model; the model's reply is shifted back for the caller.
 *
 * The shift is derived, not stored: an HMAC of the server's key over the project and the conversation, so every
 * turn of a conversation (on any instance that has the key) shifts by the same days, no write is needed to keep
 * it, and a provider that sees the shifted dates cannot work the shift out without the key.
 *
 * Dates are recognised where their day and month are unambiguous: year first (`2024-01-05`, `2024/1/5`, with a
 * time after it or not), and with an English month name (`March 4, 2024`, `4 Mar 2024`, `4th March 2024`). Day and
 * month in numbers with the year last (`04/03/2024`) are ambiguous and left as written, except the patient's birth
 * date, which is recognised in every such order. Each date keeps its form: separators, padding, month style.
 */
import { createHmac } from 'node:crypto';

/** The shortest and longest shift, in days back. */
const MIN_SHIFT_DAYS = 30;
const MAX_SHIFT_DAYS = 365;
const DAY_MS = 86_400_000;

const MONTH_NAMES = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];
const MONTH = '(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)';
const ORDINAL = '(?:st|nd|rd|th)';

/**
 * Every date form the shifter rewrites, one alternative each; each part of a form is a group, so the groups of the
 * form that matched, in order, make up the whole match. The groups are numbered, not named: V8 builds an object of
 * named groups for every match, which costs more than the rest of the search.
 */
const { pattern: DATE_PATTERN, names: GROUP_NAMES } = buildDatePattern();
const MONTH_WORD = new RegExp(`^${MONTH}$`, 'i');
/** Most distinct date texts a shifter remembers the rewriting of (a chart repeats its dates). */
const MAX_REMEMBERED = 10_000;

/** A day of the calendar. */
export interface CalendarDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

/** The days a conversation's dates move by (negative: back), from the server's key, the project and the conversation. */
export function dateShiftDays(key: string, projectId: string, conversationId: string): number {
  const digest = createHmac('sha256', key).update(`${projectId}\n${conversationId}`).digest();
  return -(MIN_SHIFT_DAYS + (digest.readUInt32BE(0) % (MAX_SHIFT_DAYS - MIN_SHIFT_DAYS + 1)));
}

/** `2024-01-05` (a FHIR date's day part) as a calendar date; undefined for a partial or invalid date. */
export function parseIsoDate(text: string | undefined): CalendarDate | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})/.exec(text ?? '');
  return match ? validDate(Number(match[1]), Number(match[2]), Number(match[3])) : undefined;
}

/** `date` moved by `days`. */
export function shiftDate(date: CalendarDate, days: number): CalendarDate {
  const moved = new Date(Date.UTC(date.year, date.month - 1, date.day) + days * DAY_MS);
  return { year: moved.getUTCFullYear(), month: moved.getUTCMonth() + 1, day: moved.getUTCDate() };
}

/** Moves every recognised date of a text by a number of days; `special` (the birth date) is also found in ambiguous forms. */
export class DateShifter {
  readonly #days: number;
  readonly #special: CalendarDate | undefined;
  readonly #rewritten = new Map<string, string>();

  constructor(days: number, special?: CalendarDate) {
    this.#days = days;
    this.#special = special;
  }

  /** `text` with its dates moved. */
  shift(text: string): string {
    if (!/\d{4}/.test(text)) {
      return text;
    }
    return text.replace(DATE_PATTERN, (matched: string, ...captures: unknown[]) => {
      let rewritten = this.#rewritten.get(matched);
      if (rewritten === undefined) {
        const groups: Record<string, string | undefined> = Object.fromEntries(GROUP_NAMES.map((name, index) => [name, captures[index] as string | undefined]));
        const parts = this.#shiftedParts(groups);
        // The groups of a form, in order, are the whole match: put together again with the moved parts.
        rewritten = parts ? GROUP_NAMES.map((name) => parts[name] ?? groups[name] ?? '').join('') : matched;
        if (this.#rewritten.size < MAX_REMEMBERED) {
          this.#rewritten.set(matched, rewritten);
        }
      }
      return rewritten;
    });
  }

  /** Where complete dates are in `text` (start, end), for a stream that must not cut through one. */
  spans(text: string): [number, number][] {
    return [...text.matchAll(DATE_PATTERN)].map((match) => [match.index, match.index + match[0].length]);
  }

  /** The new text of each group of a match, or undefined when the match is not a date to move. */
  #shiftedParts(groups: Record<string, string | undefined>): Record<string, string> | undefined {
    if (groups.ymdYear) {
      const date = validDate(Number(groups.ymdYear), Number(groups.ymdMonth), Number(groups.ymdDay));
      if (!date) {
        return undefined;
      }
      const moved = shiftDate(date, this.#days);
      const padded = isPadded(groups.ymdMonth, groups.ymdDay);
      return { ymdYear: String(moved.year), ymdMonth: number(moved.month, padded), ymdDay: number(moved.day, padded) };
    }
    if (groups.numYear) {
      return this.#shiftedSpecial(groups);
    }
    const [dayKey, monthKey, yearKey, ordinalKey] = groups.mdyMonth ? ['mdyDay', 'mdyMonth', 'mdyYear', 'mdyOrdinal'] : ['dmyDay', 'dmyMonth', 'dmyYear', 'dmyOrdinal'];
    const monthWord = groups[monthKey] ?? '';
    const date = validDate(Number(groups[yearKey]), monthNumber(monthWord), Number(groups[dayKey]));
    if (!date) {
      return undefined;
    }
    const moved = shiftDate(date, this.#days);
    return {
      [yearKey]: String(moved.year),
      [monthKey]: monthWordLike(monthWord, moved.month),
      [dayKey]: number(moved.day, groups[dayKey]?.startsWith('0') === true),
      ...(groups[ordinalKey] ? { [ordinalKey]: ordinalOf(moved.day) } : {}),
    };
  }

  /** Day and month in numbers: moved only when they are the special date (in either order). */
  #shiftedSpecial(groups: Record<string, string | undefined>): Record<string, string> | undefined {
    const special = this.#special;
    const first = Number(groups.numFirst);
    const second = Number(groups.numSecond);
    if (!special || Number(groups.numYear) !== special.year) {
      return undefined;
    }
    const moved = shiftDate(special, this.#days);
    const padded = isPadded(groups.numFirst, groups.numSecond);
    if (first === special.day && second === special.month) {
      return { numYear: String(moved.year), numFirst: number(moved.day, padded), numSecond: number(moved.month, padded) };
    }
    if (first === special.month && second === special.day) {
      return { numYear: String(moved.year), numFirst: number(moved.month, padded), numSecond: number(moved.day, padded) };
    }
    return undefined;
  }
}

/**
 * Whether `tail` (the end of a streamed text, from a word's start) could still become a date as more text
 * arrives; generous on purpose: holding a few characters back too many only delays them.
 */
export function mayBeginDate(tail: string): boolean {
  if (tail.length > 24 || /\n/.test(tail)) {
    return false;
  }
  if (/^\d{1,4}$|^\d{4}([-/.])(?:\d{1,2}(?:\1\d{0,2})?)?$|^\d{1,2}([-/.])(?:\d{1,2}(?:\2\d{0,4})?)?$/.test(tail)) {
    return true;
  }
  const dayFirst = /^\d{1,2}(?:st|nd|rd|th|s|n|r|t)?(?:\s+([a-z]*)\.?,?(?:\s+\d{0,4})?)?$/i.exec(tail);
  if (dayFirst) {
    return dayFirst[1] === undefined || mayBeginMonth(dayFirst[1]);
  }
  const monthFirst = /^([a-z]+)\.?(?:\s+(?:\d{1,2}(?:st|nd|rd|th|s|n|r|t)?,?(?:\s+\d{0,4})?)?)?$/i.exec(tail);
  return monthFirst !== null && mayBeginMonth(monthFirst[1]) && (monthFirst[1].length === tail.length || isMonthWord(monthFirst[1]));
}

function mayBeginMonth(word: string): boolean {
  const lower = word.toLowerCase();
  return lower === '' || MONTH_NAMES.some((name) => name.startsWith(lower)) || lower === 'sept';
}

function isMonthWord(word: string): boolean {
  return MONTH_WORD.test(word);
}

function validDate(year: number, month: number, day: number): CalendarDate | undefined {
  if (!(month >= 1 && month <= 12 && day >= 1 && year >= 1)) {
    return undefined;
  }
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day ? { year, month, day } : undefined;
}

function monthNumber(word: string): number {
  const lower = word.toLowerCase();
  return MONTH_NAMES.findIndex((name) => name.startsWith(lower.slice(0, 3))) + 1;
}

/** The month's name in the style of `like`: abbreviated or not, and its capitals. */
function monthWordLike(like: string, month: number): string {
  const name = MONTH_NAMES[month - 1];
  const word = MONTH_NAMES.includes(like.toLowerCase()) ? name : name.slice(0, 3);
  if (like === like.toUpperCase()) {
    return word.toUpperCase();
  }
  return like[0] === like[0].toUpperCase() ? word[0].toUpperCase() + word.slice(1) : word;
}

/** Whether a numeric date writes day and month with two digits (`2024-01-05`, `14/03/1958`), not as few as needed (`2024-1-5`). */
function isPadded(...parts: (string | undefined)[]): boolean {
  return parts.every((part) => part?.length === 2);
}

function number(value: number, padded: boolean): string {
  return padded ? String(value).padStart(2, '0') : String(value);
}

function ordinalOf(day: number): string {
  if (day >= 11 && day <= 13) {
    return 'th';
  }
  return ['th', 'st', 'nd', 'rd'][day % 10] ?? 'th';
}

function buildDatePattern(): { readonly pattern: RegExp; readonly names: readonly string[] } {
  const names: string[] = [];
  const group = (name: string, source: string, optional = false): string => {
    names.push(name);
    return `(${source})${optional ? '?' : ''}`;
  };
  const same = (name: string): string => `\\${names.indexOf(name) + 1}`;
  const digits = (count: string): string => String.raw`\d{${count}}`;
  // In this order: a group's number is its place among all of them.
  const forms = [
    String.raw`(?<!\d)` + group('ymdYear', digits('4')) + group('ymdSep', '[-/.]') + group('ymdMonth', digits('1,2')) + group('ymdSep2', same('ymdSep')) + group('ymdDay', digits('1,2')) + String.raw`(?!\d)`,
    String.raw`(?<!\d)` + group('numFirst', digits('1,2')) + group('numSep', '[-/.]') + group('numSecond', digits('1,2')) + group('numSep2', same('numSep')) + group('numYear', digits('4')) + String.raw`(?!\d)`,
    String.raw`\b` +
      group('mdyMonth', MONTH) + group('mdyAfterMonth', String.raw`\.?\s+`) + group('mdyDay', digits('1,2')) + group('mdyOrdinal', ORDINAL, true) +
      group('mdyAfterDay', String.raw`,?\s+`) + group('mdyYear', digits('4')) + String.raw`(?!\d)`,
    String.raw`\b` +
      group('dmyDay', digits('1,2')) + group('dmyOrdinal', ORDINAL, true) + group('dmyAfterDay', String.raw`\s+`) + group('dmyMonth', MONTH) +
      group('dmyAfterMonth', String.raw`\.?,?\s+`) + group('dmyYear', digits('4')) + String.raw`(?!\d)`,
  ];
  return { pattern: new RegExp(forms.join('|'), 'gi'), names };
}
