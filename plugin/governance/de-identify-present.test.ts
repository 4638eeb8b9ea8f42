/**
 * What a provider can work out of the dates it is sent, measured: it plays the provider against the text the
 * Pseudonymizer sends, for every shift a conversation can have (30 to 365 days back), knowing the rule and when it
 * received the request. docs/governance.md states these figures.
 */
import type { Patient } from '@medplum/fhirtypes';
import { Pseudonymizer } from './de-identify-text.ts';
import { birthDateOf, mayBeginMarker, PRESENT_WINDOW_DAYS, TurnPresent } from './de-identify-present.ts';

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

describe('the present window: what a model receives and what a clinician reads back', () => {
  const pseudonyms = new Pseudonymizer(PATIENT, -200, NOW);

  test('a date 30 days from the turn, either side, is sent as its distance; 31 days away it is shifted', () => {
    // 2026-10-29 is 30 days before 2026-11-28, 2026-12-28 30 days after; one day further, each moves 200 days back.
    expect(pseudonyms.deIdentify('2026-10-29, 2026-10-28, 2026-12-28, 2026-12-29')).toBe('[30 days ago], 2026-04-11, [in 30 days], 2026-06-12');
    expect(pseudonyms.deIdentify('2026-11-27, 2026-11-28, 2026-11-29, 2026-11-26, 2026-11-30')).toBe('[yesterday], [today], [tomorrow], [2 days ago], [in 2 days]');
  });

  test('a marker a model writes reads back as the day it stands for, however it is capitalised; one beyond the window stays as written', () => {
    expect(pseudonyms.reIdentify('[Yesterday], [TODAY], [tomorrow], [In 2 Days], [12 days ago], [30 days ago], [in 30 days]')).toBe(
      '2026-11-27, 2026-11-28, 2026-11-29, 2026-11-30, 2026-11-16, 2026-10-29, 2026-12-28'
    );
    expect(pseudonyms.reIdentify('[31 days ago], [in 31 days], [in 100 days], [1000 days ago]')).toBe('[31 days ago], [in 31 days], [in 100 days], [1000 days ago]');
    // A date on the shifted calendar moves back; text with no marker and no date reads as written.
    expect(pseudonyms.reIdentify('seen 2026-04-11 and 2026-06-12')).toBe('seen 2026-10-28 and 2026-12-29');
    expect(pseudonyms.reIdentify('No change since.')).toBe('No change since.');
  });

  test('day and month in numbers near the turn: sent as a distance only when one order makes a date', () => {
    // 28/11/2026 is only 28 November; 29/11/2026 only 29 November.
    expect(pseudonyms.deIdentify('seen 28/11/2026, next 29/11/2026')).toBe('seen [today], next [tomorrow]');
    // 11/12/2026 is 11 December (in 13 days) or 12 November (16 days ago); 12/01/2026 is 12 January or 1 December:
    // which one the writer meant is unknown, so neither distance is sent, and nothing is shifted.
    expect(pseudonyms.deIdentify('seen 11/12/2026 and 12/01/2026')).toBe('seen 11/12/2026 and 12/01/2026');
    // One reading, far from the turn: left as written (shifted, it would still be read in either order).
    expect(pseudonyms.deIdentify('seen 25/03/2026')).toBe('seen 25/03/2026');
  });

  test('a birth date written day and month in numbers, in either order, is sent as the age', () => {
    // Born 3 April 1958: 03/04/1958 and 04/03/1958 may each be it.
    const aprilBorn = new Pseudonymizer({ resourceType: 'Patient', birthDate: '1958-04-03' }, -200, NOW);
    expect(aprilBorn.deIdentify('born 03/04/1958 (04/03/1958)')).toBe('born [age 68] ([age 68])');
  });

  test('the age marker reads back as the birth date the record holds, in any case; another age stays', () => {
    expect(pseudonyms.reIdentify('[AGE 68], [age 68], [age 67], [age 90+]')).toBe('1958-03-14, 1958-03-14, [age 67], [age 90+]');
    // A patient without a birth date, or with its year only: no age is sent, no marker stands for the birth date, and
    // the other dates are rewritten as for anyone.
    for (const birthDate of [undefined, '1958']) {
      const unknownBirth = new Pseudonymizer({ resourceType: 'Patient', birthDate }, -200, NOW);
      expect(unknownBirth.deIdentify('born 1958-03-14, seen 2026-11-27')).toBe('born 1957-08-26, seen [yesterday]');
      expect(unknownBirth.reIdentify('[age 68], [today]')).toBe('[age 68], 2026-11-28');
    }
    const baby = new Pseudonymizer({ resourceType: 'Patient', birthDate: '2025-09-30' }, -200, NOW);
    expect(baby.reIdentify(baby.deIdentify('born 2025-09-30'))).toBe('born 2025-09-30');
    const oneMonth = new Pseudonymizer({ resourceType: 'Patient', birthDate: '2026-10-28' }, -200, NOW);
    expect(oneMonth.reIdentify(oneMonth.deIdentify('born 2026-10-28'))).toBe('born 2026-10-28');
    const eldest = new Pseudonymizer({ resourceType: 'Patient', birthDate: '1920-01-01' }, -200, NOW);
    expect(eldest.deIdentify('born 1920-01-01')).toBe('born [age 90+]');
    expect(eldest.reIdentify('born [age 90+]')).toBe('born 1920-01-01');
  });

  test('the age around its boundaries: a birthday on the turn\'s day counts, two years is sent in years, a birth date ahead is 0 months', () => {
    const age = (birthDate: string): string => new Pseudonymizer({ resourceType: 'Patient', birthDate }, -200, NOW).deIdentify(`born ${birthDate}`);
    expect(age('2025-11-28')).toBe('born [age 12 months]');
    expect(age('2025-11-29')).toBe('born [age 11 months]');
    expect(age('2024-11-28')).toBe('born [age 2]');
    expect(age('2024-11-29')).toBe('born [age 23 months]');
    expect(age('2026-11-28')).toBe('born [age 0 months]');
    expect(age('2026-12-15')).toBe('born [age 0 months]');
    expect(age('1960-11-28')).toBe('born [age 66]');
    expect(age('1960-12-01')).toBe('born [age 65]');
  });
});

describe('the birth date in the forms only it is recognised in', () => {
  test('all digits, a two-digit year with numbers or with the month\'s name: each sent as the age', () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -200, NOW);
    const forms = [
      '19580314', '14031958', '03141958',
      '14/03/58', '14-3-58', '14.03.58', '14 3 58', '3/14/58', '03-14-58', '58-03-14', '58/3/14',
      '14-Mar-58', '14 March 58', '14th March, 58', "14 Mar. '58", 'Mar 14, 58', 'March 14th 58', 'Mar. 14, 58', 'MARCH 14 58',
    ];
    for (const form of forms) {
      expect([form, pseudonyms.deIdentify(`born ${form}.`)]).toEqual([form, 'born [age 68].']);
    }
  });

  test('what only looks like it stays: separators that differ, digits or letters around it, another day', () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -200, NOW);
    for (const text of ['14/03-58', '3-14/58', '58-03/14', '119580314', '195803141', 'A14/03/58', '14/03/581', '014/03/58', '15/03/58', '14-Apr-58', '14/03/59']) {
      expect([text, pseudonyms.deIdentify(text)]).toEqual([text, text]);
    }
  });

  test('a day or a month written with a zero too many is another number', () => {
    const pseudonyms = new Pseudonymizer({ resourceType: 'Patient', birthDate: '1958-10-10' }, -200, NOW);
    expect(pseudonyms.deIdentify('born 10/10/58')).toBe('born [age 68]');
    for (const text of ['010/10/58', '10/010/58', '58-010-10']) {
      expect([text, pseudonyms.deIdentify(text)]).toEqual([text, text]);
    }
  });

  test('a birth date in December, early in the month, of this century', () => {
    const pseudonyms = new Pseudonymizer({ resourceType: 'Patient', birthDate: '2001-12-05' }, -200, NOW);
    // Born 5 December 2001: 24 on 28 November 2026, the 25th birthday a week ahead.
    for (const form of ['2001-12-05', '20011205', '05122001', '12052001', '5/12/01', '05.12.01', '12-5-01', '01-12-05', '5 Dec 01', 'Dec 5th, 01', 'December 05 01', "5th December '01"]) {
      expect([form, pseudonyms.deIdentify(`born ${form}`)]).toEqual([form, 'born [age 24]']);
    }
  });
});

describe('markers in a streamed reply', () => {
  const present = new TurnPresent(NOW, birthDateOf('1958-03-14'));

  test('where each complete marker is, so a stream never cuts through one', () => {
    const text = 'Seen [3 days ago] and [today]; born [age 68], next [in 12 days]. [unknown] [4 weeks ago]';
    const at = (marker: string): [number, number] => [text.indexOf(marker), text.indexOf(marker) + marker.length];
    expect(present.spans(text)).toEqual([at('[3 days ago]'), at('[today]'), at('[age 68]'), at('[in 12 days]')]);
    expect(present.spans('no markers')).toEqual([]);
  });

  test('what may still grow into a marker is held back; a closed bracket, text before it, or a long tail is not', () => {
    for (const tail of ['[', '[t', '[Today', '[3 days a', '[in 12 day', '[age 90+', '[age 14 months']) {
      expect([tail, mayBeginMarker(tail)]).toEqual([tail, true]);
    }
    for (const tail of ['[today]', 'x[to', '[3-days', `[${'a'.repeat(15)}`, '', 'today']) {
      expect([tail, mayBeginMarker(tail)]).toEqual([tail, false]);
    }
  });
});
