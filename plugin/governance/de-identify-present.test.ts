/**
 * What a provider can work out of the dates it is sent, measured: it plays the provider against the text the
 * Pseudonymizer sends, for every shift a conversation can have (30 to 365 days back), knowing the rule and when it
 * received the request. docs/governance.md states these figures.
 */
import type { Patient } from '@medplum/fhirtypes';
import { Pseudonymizer } from './de-identify-text.ts';
import { PRESENT_WINDOW_DAYS } from './de-identify-present.ts';

const DAY_MS = 86_400_000;
const NOW = new Date('2026-11-28T10:00:00Z');
const SHIFTS = Array.from({ length: 336 }, (_, index) => -(30 + index));
const PATIENT: Patient = { resourceType: 'Patient', name: [{ given: ['Maria'], family: 'Lopez' }], birthDate: '1958-03-14' };

const daysAgo = (days: number, time = 'T09:00:00Z'): string => new Date(NOW.getTime() - days * DAY_MS).toISOString().slice(0, 10) + time;

/** A request as an agent framework sends it: today's date first, then the chart (newest first), then the question. */
function request(recordAges: readonly number[]): string {
  const chart = recordAges.map((age) => `- ${daysAgo(age)} Heart rate ${70 + (age % 20)} /min`).join('\n');
  return [`Today's date is ${NOW.toISOString().slice(0, 10)}; the time is ${NOW.toISOString()}.`, `Patient: Maria Lopez, born 1958-03-14`, chart, 'How is she?'].join('\n');
}

/** What the provider concludes: the shifts still possible, and its best guess (the newest calendar date as the first day outside the window). */
function provider(sent: string): { readonly possible: number[]; readonly guess?: number } {
  const calendar = [...sent.matchAll(/(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)/g)].map((match) => Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])));
  const today = Date.UTC(NOW.getUTCFullYear(), NOW.getUTCMonth(), NOW.getUTCDate());
  const labelledToday = /today's date is (\d{4})-(\d{2})-(\d{2})/i.exec(sent);
  if (labelledToday) {
    // The old method's leak: the shifted "today" against the day the request arrived.
    const shift = Math.round((Date.UTC(Number(labelledToday[1]), Number(labelledToday[2]) - 1, Number(labelledToday[3])) - today) / DAY_MS);
    return { possible: [shift], guess: shift };
  }
  if (calendar.length === 0) {
    return { possible: SHIFTS };
  }
  const newestDaysBack = Math.round((today - Math.max(...calendar)) / DAY_MS);
  // A calendar date is a real date more than the window back, moved back by the shift.
  const possible = SHIFTS.filter((shift) => -shift <= newestDaysBack - PRESENT_WINDOW_DAYS - 1);
  return { possible, guess: -(newestDaysBack - PRESENT_WINDOW_DAYS - 1) };
}

/** Over every shift: how often the guess is the shift, the largest error, and the median number of shifts left. */
function measure(recordAges: readonly number[]): { readonly exact: number; readonly maxError: number; readonly medianPossible: number } {
  const outcomes = SHIFTS.map((shift) => {
    const { possible, guess } = provider(new Pseudonymizer(PATIENT, shift, NOW).deIdentify(request(recordAges)));
    expect(possible).toContain(shift);
    return { exact: guess === shift, error: guess === undefined ? Infinity : Math.abs(guess - shift), possible: possible.length };
  });
  const sorted = outcomes.map((outcome) => outcome.possible).sort((a, b) => a - b);
  return { exact: outcomes.filter((outcome) => outcome.exact).length / outcomes.length, maxError: Math.max(...outcomes.map((outcome) => outcome.error)), medianPossible: sorted[Math.floor(sorted.length / 2)] };
}

describe('what a provider works out of the dates', () => {
  test("today's date and the time in the system prompt, vital signs minutes old: not the shift, not the birth date", () => {
    const sent = new Pseudonymizer(PATIENT, -200, NOW).deIdentify(request([0, 1, 90, 400]));
    expect(sent).toContain("Today's date is [today]; the time is [today]T10:00:00.000Z.");
    expect(sent).toContain('born [age 68]');
    expect(sent).toContain('- [today]T09:00:00Z Heart rate');
    // Only the two older records are on the shifted calendar.
    expect(sent.match(/\d{4}-\d{2}-\d{2}/g)).toHaveLength(2);
    // The birth date is never sent: a provider knows it to within the year the age leaves (366 days), whatever else it learns.
    expect(sent).not.toMatch(/1958|1957/);
    // The newest calendar date is 90 days back (90 + the shift on the calendar): a guess that it is the first day
    // outside the window is 59 days off, and 228 of the 336 shifts stay possible (the median over every shift).
    expect(measure([0, 1, 90, 400])).toEqual({ exact: 0, maxError: 59, medianPossible: 228 });
  });

  test('the same turn before (every date moved by the shift, today included) gave the shift exactly', () => {
    const shift = -200;
    const shiftedToday = new Date(NOW.getTime() + shift * DAY_MS).toISOString().slice(0, 10);
    expect(provider(`Today's date is ${shiftedToday}.`)).toEqual({ possible: [shift], guess: shift });
  });

  test('a chart with a record every 3 months: the shift stays within a wide range', () => {
    expect(measure([0, 45, 135, 225, 315])).toEqual({ exact: 0, maxError: 14, medianPossible: 183 });
  });

  test('the limit: a chart with a record every week, or every day, up to the present gives the shift within days, or exactly', () => {
    expect(measure(Array.from({ length: 20 }, (_, index) => index * 7))).toEqual({ exact: 0, maxError: 4, medianPossible: 173 });
    expect(measure(Array.from({ length: 120 }, (_, index) => index))).toEqual({ exact: 1, maxError: 0, medianPossible: 169 });
  });
});
