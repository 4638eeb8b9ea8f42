/**
 * The dates a provider could tie to the real calendar, and what is sent in their place. A provider knows when it
 * receives a request, so a date it can recognise as "now" (today's date in a system prompt, the request's own
 * timestamp, vital signs taken minutes ago) would tell it the conversation's shift exactly, and with the shift
 * every other date, the birth date included. So:
 *
 * - the patient's birth date is never sent, in any form: it becomes the patient's age at the turn (`[age 68]`;
 *   months under 2 years, `[age 14 months]`; `[age 90+]` from 90, as HIPAA's Safe Harbor groups ages over 89);
 * - a date within {@link PRESENT_WINDOW_DAYS} days of the turn's day (UTC), before or after, is written as its
 *   distance from that day (`[today]`, `[yesterday]`, `[3 days ago]`, `[in 2 days]`), never on the shifted
 *   calendar: the provider learns these recent days as they are (it could place them anyway), not the shift;
 * - every other date moves by the conversation's shift, so intervals between those stay exact.
 *
 * On the way back, a marker becomes the date it stands for (ISO, `2026-11-25`; the birth date as the record holds
 * it), and a shifted date moves back. What this leaves a provider able to work out is measured in
 * docs/governance.md (de-identify-present.test.ts measures it).
 */
import { dayOf, daysBetween, isoDate, MONTH, parseIsoDate, sameDay, shiftDate, type CalendarDate, type DateRewrite, type DateRule } from './de-identify-dates.ts';

/** Days either side of the turn's day written relative to it rather than shifted. */
export const PRESENT_WINDOW_DAYS = 30;
/** Ages from this one on are sent as `[age 90+]` (Safe Harbor: ages over 89 are grouped). */
const OLDEST_AGE_SENT = 90;
/** Under this age in years, the age is sent in months. */
const AGE_IN_MONTHS_BELOW = 2;

const NAMED_OFFSETS: ReadonlyMap<string, number> = new Map([
  ['[today]', 0],
  ['[yesterday]', -1],
  ['[tomorrow]', 1],
]);
const MARKER = /\[(today|yesterday|tomorrow|(\d{1,3}) days ago|in (\d{1,3}) days|age (?:\d{1,3}(?: months?)?|\d{2,3}\+))\]/gi;

/** The present of one turn: its day, and the patient's birth date. */
export class TurnPresent {
  readonly #today: CalendarDate;
  readonly #birthDate: CalendarDate | undefined;
  readonly #birthDateText: string | undefined;
  readonly #ageMarker: string | undefined;
  readonly #birthVariants: RegExp | undefined;
  /** Two digits every variant of the birth date holds (its year's last two): text without them is not searched. */
  readonly #birthYearDigits: string | undefined;

  /** `birthDate`: the record's (`1958-03-14`); `now`: the turn's time. */
  constructor(now: Date, birthDate: { readonly date: CalendarDate; readonly text: string } | undefined) {
    this.#today = dayOf(now);
    this.#birthDate = birthDate?.date;
    this.#birthDateText = birthDate?.text;
    this.#ageMarker = birthDate && `[age ${ageOf(birthDate.date, this.#today)}]`;
    this.#birthVariants = birthDate && birthDateVariants(birthDate.date);
    this.#birthYearDigits = birthDate && String(birthDate.date.year % 100).padStart(2, '0');
  }

  /** The rule for dates going to the model: the birth date as the age, the present relative to the turn's day, the rest shifted by `days`. */
  outgoing(days: number): DateRule {
    return (readings, ambiguous): DateRewrite => {
      const birthDate = this.#birthDate;
      if (birthDate && this.#ageMarker && readings.some((reading) => sameDay(reading, birthDate))) {
        return { text: this.#ageMarker };
      }
      const recent = readings.map((reading) => this.#relative(reading));
      if (ambiguous) {
        // Day and month in numbers: rewritten only when it has one reading, a recent one (else left as written).
        return readings.length === 1 && recent[0] !== undefined ? { text: recent[0] } : undefined;
      }
      return recent[0] !== undefined ? { text: recent[0] } : { date: shiftDate(readings[0], days) };
    };
  }

  /** The patient's birth date in the forms only it is recognised in (`19580314`, `14/03/58`, `14-Mar-58`), as the age. */
  replaceBirthDateVariants(text: string): string {
    const pattern = this.#birthVariants;
    return pattern && this.#ageMarker && this.#birthYearDigits && text.includes(this.#birthYearDigits) ? text.replace(pattern, this.#ageMarker) : text;
  }

  /** A model's text with each marker replaced by the date it stands for. */
  restore(text: string): string {
    if (!text.includes('[')) {
      return text;
    }
    return text.replace(MARKER, (marker: string, _word: string, ago: string | undefined, ahead: string | undefined) => {
      const lower = marker.toLowerCase();
      if (lower.startsWith('[age')) {
        return lower === this.#ageMarker?.toLowerCase() && this.#birthDateText ? this.#birthDateText : marker;
      }
      const offset = ago !== undefined ? -Number(ago) : ahead !== undefined ? Number(ahead) : NAMED_OFFSETS.get(lower);
      return offset === undefined || Math.abs(offset) > PRESENT_WINDOW_DAYS ? marker : isoDate(shiftDate(this.#today, offset));
    });
  }

  /** Where complete markers are in `text` (start, end). */
  spans(text: string): [number, number][] {
    return [...text.matchAll(MARKER)].map((match) => [match.index, match.index + match[0].length]);
  }

  /** `[3 days ago]` for a date within the window of the turn's day; undefined for any other. */
  #relative(date: CalendarDate): string | undefined {
    const offset = daysBetween(this.#today, date);
    if (Math.abs(offset) > PRESENT_WINDOW_DAYS) {
      return undefined;
    }
    if (offset === 0) {
      return '[today]';
    }
    if (Math.abs(offset) === 1) {
      return offset < 0 ? '[yesterday]' : '[tomorrow]';
    }
    return offset < 0 ? `[${-offset} days ago]` : `[in ${offset} days]`;
  }
}

/** Whether `tail` (the end of a streamed text) could still become a marker as more text arrives. */
export function mayBeginMarker(tail: string): boolean {
  return /^\[[a-z0-9+ ]{0,14}$/i.test(tail);
}

/** The patient's age on `today`: `68`, `14 months`, `90+`. */
function ageOf(birthDate: CalendarDate, today: CalendarDate): string {
  const months = (today.year - birthDate.year) * 12 + (today.month - birthDate.month) - (today.day < birthDate.day ? 1 : 0);
  const years = Math.floor(months / 12);
  if (years >= OLDEST_AGE_SENT) {
    return `${OLDEST_AGE_SENT}+`;
  }
  if (years < AGE_IN_MONTHS_BELOW) {
    const whole = Math.max(0, months);
    return `${whole} ${whole === 1 ? 'month' : 'months'}`;
  }
  return String(years);
}

/**
 * The birth date in the forms no other date is recognised in, as they may be typed or exported: all digits
 * (`19580314`, `14031958`, `03141958`), a two-digit year with numbers (`14/03/58`, `3-14-58`, `58-03-14`) or with
 * the month's name (`14-Mar-58`, `14 March 58`, `Mar 14, 58`).
 */
function birthDateVariants(date: CalendarDate): RegExp {
  const pad = (value: number): string => String(value).padStart(2, '0');
  const loose = (value: number): string => (value < 10 ? `0?${value}` : String(value));
  const [year, shortYear, month, day] = [String(date.year), pad(date.year % 100), date.month, date.day];
  const separator = '[-/. ]';
  // MONTH lists the months' patterns in order, January first.
  const monthName = MONTH.slice(3, -1).split('|')[month - 1];
  const forms = [
    `${year}${pad(month)}${pad(day)}`,
    `${pad(day)}${pad(month)}${year}`,
    `${pad(month)}${pad(day)}${year}`,
    `${loose(day)}(${separator})${loose(month)}(?:\\1)${shortYear}`,
    `${loose(month)}(${separator})${loose(day)}(?:\\2)${shortYear}`,
    `${shortYear}(${separator})${loose(month)}(?:\\3)${loose(day)}`,
    `${loose(day)}(?:st|nd|rd|th)?[-/. ]*${monthName}\\.?[-/. ,]*'?${shortYear}`,
    `${monthName}\\.?[-/. ]*${loose(day)}(?:st|nd|rd|th)?[-/. ,]*'?${shortYear}`,
  ];
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${forms.join('|')})(?!\\p{N})`, 'giu');
}

/** The birth date of a Patient, as the present's rule needs it. */
export function birthDateOf(text: string | undefined): { readonly date: CalendarDate; readonly text: string } | undefined {
  const date = parseIsoDate(text);
  return date && text ? { date, text } : undefined;
}
