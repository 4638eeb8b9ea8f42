/**
 * Dates in text sent de-identified to a model not cleared for patient data: recognised, and rewritten as the turn's
 * rule says (de-identify-present.ts): moved by the conversation's shift, or written as a marker that holds no
 * calendar date. The model's reply goes through the reverse rewriting for the caller.
 *
 * The shift is derived, not stored: an HMAC of the server's key over the project and the conversation, so every
 * turn of a conversation (on any instance that has the key) shifts by the same days and no write is needed to keep
 * it. The key keeps the shift from being computed; what keeps it from being worked out of the text (today's date,
 * the request's own time) is the present's rule in de-identify-present.ts.
 *
 * Dates are recognised where their day and month are unambiguous: year first (`2024-01-05`, `2024/1/5`, with a
 * time after it or not), and with an English month name (`March 4, 2024`, `4 Mar 2024`, `4th of March 2024`). Day
 * and month in numbers with the year last (`04/03/2024`) are recognised too, and told to the rule as ambiguous:
 * both readings are given. Each date rewritten as a date keeps its form: separators, padding, month style.
 */
import { createHmac } from 'node:crypto';

/** The shortest and longest shift, in days back. */
const MIN_SHIFT_DAYS = 30;
const MAX_SHIFT_DAYS = 365;
const DAY_MS = 86_400_000;
/** The first year a date is recognised in. */
const FIRST_YEAR = 1000;

const MONTH_NAMES = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];
/** A month's name or its abbreviation. */
export const MONTH = '(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)';
const ORDINAL = '(?:st|nd|rd|th)';

/**
 * Every date form the rewriter recognises, one alternative each; each part of a form is a group, so the groups of
 * the form that matched, in order, make up the whole match. The groups are numbered, not named: V8 builds an object
 * of named groups for every match, which costs more than the rest of the search.
 */
const { pattern: DATE_PATTERN, names: GROUP_NAMES } = buildDatePattern();
const MONTH_WORD = new RegExp(`^${MONTH}$`, 'i');
/** Most distinct date texts a rewriter remembers the rewriting of (a chart repeats its dates). */
const MAX_REMEMBERED = 10_000;

/** A day of the calendar. */
export interface CalendarDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
}

/**
 * What a recognised date becomes: another day, written in the date's own form; a text in its place; or undefined,
 * left as written.
 */
export type DateRewrite = { readonly date: CalendarDate } | { readonly text: string } | undefined;

/**
 * The rule a rewriter applies. `readings`: the valid days the text may mean (one; or two for day and month in
 * numbers, `04/03/2024`, when both orders make a date); `ambiguous`: the form is one of those, whose day and month
 * only the reader's convention tells apart. An ambiguous form takes a `text` answer only (a `date` leaves it as
 * written): written as a date again, it would still be read in either order.
 */
export type DateRule = (readings: readonly CalendarDate[], ambiguous: boolean) => DateRewrite;

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

/** Whole days from `from` to `to` (negative when `to` is earlier). */
export function daysBetween(from: CalendarDate, to: CalendarDate): number {
  return Math.round((Date.UTC(to.year, to.month - 1, to.day) - Date.UTC(from.year, from.month - 1, from.day)) / DAY_MS);
}

/** The UTC day of an instant. */
export function dayOf(instant: Date): CalendarDate {
  return { year: instant.getUTCFullYear(), month: instant.getUTCMonth() + 1, day: instant.getUTCDate() };
}

/** `2024-01-05`. */
export function isoDate(date: CalendarDate): string {
  return `${String(date.year).padStart(4, '0')}-${number(date.month, true)}-${number(date.day, true)}`;
}

/** Whether two calendar dates are the same day. */
export function sameDay(first: CalendarDate, second: CalendarDate): boolean {
  return first.year === second.year && first.month === second.month && first.day === second.day;
}

/**
 * A valid calendar date, or undefined. Years before {@link FIRST_YEAR} are none: `Date.UTC` reads 0 to 99 as 1900 to
 * 1999, a moved year below 1000 would be written with fewer than four digits, and no date of care is that old
 * (`0001-01-01` is how some exports write "no date").
 */
function validDate(year: number, month: number, day: number): CalendarDate | undefined {
  if (!(month >= 1 && month <= 12 && day >= 1 && year >= FIRST_YEAR)) {
    return undefined;
  }
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day ? { year, month, day } : undefined;
}

/** The number of a month's name or abbreviation (`Mar` → 3); 0 when it is none. */
function monthNumber(word: string): number {
  const lower = word.toLowerCase();
  return MONTH_NAMES.findIndex((name) => name.startsWith(lower.slice(0, 3))) + 1;
}

/** Rewrites every recognised date of a text by a rule. */
export class DateRewriter {
  readonly #rule: DateRule;
  readonly #rewritten = new Map<string, string>();

  constructor(rule: DateRule) {
    this.#rule = rule;
  }

  /** `text` with its dates rewritten. */
  rewrite(text: string): string {
    if (!/\d{4}/.test(text)) {
      return text;
    }
    return text.replace(DATE_PATTERN, (matched: string, ...captures: unknown[]) => {
      let rewritten = this.#rewritten.get(matched);
      if (rewritten === undefined) {
        const groups: Record<string, string | undefined> = Object.fromEntries(GROUP_NAMES.map((name, index) => [name, captures[index] as string | undefined]));
        rewritten = this.#rewriteMatch(matched, groups);
        // Stryker disable next-line all: equivalent, how much is remembered changes memory and work, never the text.
        if (this.#rewritten.size < MAX_REMEMBERED) {
          // Stryker disable next-line all: as above.
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

  #rewriteMatch(matched: string, groups: Record<string, string | undefined>): string {
    const form = formOf(groups);
    if (!form) {
      return matched;
    }
    const answer = this.#rule(form.readings, form.ambiguous);
    if (answer === undefined) {
      return matched;
    }
    if ('text' in answer) {
      return answer.text;
    }
    const parts = form.write(answer.date);
    // The groups of a form, in order, are the whole match: put together again with the rewritten parts.
    return parts ? GROUP_NAMES.map((name) => parts[name] ?? groups[name] ?? '').join('') : matched;
  }
}

/** A matched form: the days it may mean, and how to write another day in its place (its groups' new text). */
interface MatchedForm {
  readonly readings: readonly CalendarDate[];
  readonly ambiguous: boolean;
  readonly write: (date: CalendarDate) => Record<string, string> | undefined;
}

function formOf(groups: Record<string, string | undefined>): MatchedForm | undefined {
  if (groups.ymdYear) {
    const date = validDate(Number(groups.ymdYear), Number(groups.ymdMonth), Number(groups.ymdDay));
    const padded = isPadded(groups.ymdMonth, groups.ymdDay);
    return date && { readings: [date], ambiguous: false, write: (moved) => ({ ymdYear: String(moved.year), ymdMonth: number(moved.month, padded), ymdDay: number(moved.day, padded) }) };
  }
  if (groups.numYear) {
    const [first, second, year] = [Number(groups.numFirst), Number(groups.numSecond), Number(groups.numYear)];
    const dayFirst = validDate(year, second, first);
    const monthFirst = validDate(year, first, second);
    const readings = [dayFirst, monthFirst].filter((date): date is CalendarDate => date !== undefined).filter((date, index, all) => index === 0 || !sameDay(date, all[0]));
    // Written as a date again it would be read in either order: an ambiguous form takes a text, or stays as it is.
    return readings.length === 0 ? undefined : { readings, ambiguous: true, write: () => undefined };
  }
  const [dayKey, monthKey, yearKey, ordinalKey] = groups.mdyMonth ? ['mdyDay', 'mdyMonth', 'mdyYear', 'mdyOrdinal'] : ['dmyDay', 'dmyMonth', 'dmyYear', 'dmyOrdinal'];
  const monthWord = groups[monthKey] ?? '';
  const date = validDate(Number(groups[yearKey]), monthNumber(monthWord), Number(groups[dayKey]));
  return (
    date && {
      readings: [date],
      ambiguous: false,
      write: (moved) => ({
        [yearKey]: String(moved.year),
        [monthKey]: monthWordLike(monthWord, moved.month),
        [dayKey]: number(moved.day, groups[dayKey]?.startsWith('0') === true),
        ...(groups[ordinalKey] ? { [ordinalKey]: ordinalOf(moved.day) } : {}),
      }),
    }
  );
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
  const dayFirst = /^\d{1,2}(?:st|nd|rd|th|s|n|r|t)?(?:\s+(?:o|of|of\s+)?([a-z]*)\.?,?(?:\s+\d{0,4})?)?$/i.exec(tail);
  if (dayFirst) {
    return dayFirst[1] === undefined || mayBeginMonth(dayFirst[1]);
  }
  const monthFirst = /^([a-z]+)\.?(?:\s+(?:\d{1,2}(?:st|nd|rd|th|s|n|r|t)?,?(?:\s+\d{0,4})?)?)?$/i.exec(tail);
  return monthFirst !== null && mayBeginMonth(monthFirst[1]) && (monthFirst[1].length === tail.length || isMonthWord(monthFirst[1]));
}

/** Whether `word` begins a month's name (`''`, `o`, `sept` included); `of` does not: `4 of` is matched as `o` then `f`. */
function mayBeginMonth(word: string): boolean {
  const lower = word.toLowerCase();
  return MONTH_NAMES.some((name) => name.startsWith(lower));
}

function isMonthWord(word: string): boolean {
  return MONTH_WORD.test(word);
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
      group('dmyDay', digits('1,2')) + group('dmyOrdinal', ORDINAL, true) + group('dmyAfterDay', String.raw`\s+(?:of\s+)?`) + group('dmyMonth', MONTH) +
      group('dmyAfterMonth', String.raw`\.?,?\s+`) + group('dmyYear', digits('4')) + String.raw`(?!\d)`,
  ];
  return { pattern: new RegExp(forms.join('|'), 'gi'), names };
}
