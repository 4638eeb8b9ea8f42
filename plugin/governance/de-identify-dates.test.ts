import { DateRewriter, dateShiftDays, isoDate, mayBeginDate, parseIsoDate, shiftDate, type DateRule } from './de-identify-dates.ts';
import { birthDateOf, TurnPresent } from './de-identify-present.ts';

/** The rule that moves every unambiguous date by `days`, and leaves day and month in numbers as written. */
const shiftBy = (days: number): DateRule => (readings, ambiguous) => (ambiguous ? undefined : { date: shiftDate(readings[0], days) });

describe('dateShiftDays', () => {
  test('is the same for every turn of a conversation, differs between conversations, and moves back 30 to 365 days', () => {
    const key = 'k'.repeat(32);
    expect(dateShiftDays(key, 'project', 'conversation-1')).toBe(dateShiftDays(key, 'project', 'conversation-1'));
    const shifts = Array.from({ length: 200 }, (_, index) => dateShiftDays(key, 'project', `conversation-${index}`));
    expect(new Set(shifts).size).toBeGreaterThan(100);
    expect(Math.min(...shifts)).toBeGreaterThanOrEqual(-365);
    expect(Math.max(...shifts)).toBeLessThanOrEqual(-30);
    // Another key (another server), another shift: the key is what a provider would need to undo it.
    expect(Array.from({ length: 20 }, (_, index) => dateShiftDays('x'.repeat(32), 'project', `conversation-${index}`))).not.toEqual(shifts.slice(0, 20));
  });

  test('takes every shift from 30 to 365 days back, the bounds included', () => {
    // 20,000 conversations over 336 shifts: each shift is taken about 60 times.
    const shifts = new Set(Array.from({ length: 20_000 }, (_, index) => dateShiftDays('k'.repeat(32), 'project', `conversation-${index}`)));
    expect([...shifts].sort((a, b) => a - b)).toEqual(Array.from({ length: 336 }, (_, index) => -365 + index));
  });
});

describe('DateRewriter', () => {
  const forward = new DateRewriter(shiftBy(-100));

  test('moves year-first dates in every separator and padding, with or without a time', () => {
    expect(forward.rewrite('seen 2024-01-05, 2024-01-05T10:00:00Z, 2024/1/5 and 2024.01.05')).toBe('seen 2023-09-27, 2023-09-27T10:00:00Z, 2023/9/27 and 2023.09.27');
    // FHIR search prefixes stay on the date they qualify.
    expect(forward.rewrite('{"date":"ge2024-03-01"}')).toBe('{"date":"ge2023-11-22"}');
  });

  test('moves dates written with a month name, keeping their style', () => {
    expect(forward.rewrite('March 4, 2024; 4 March 2024; 4th Mar. 2024; MARCH 4 2024; sept 30, 2024; 4th of March 2024')).toBe(
      'November 25, 2023; 25 November 2023; 25th Nov. 2023; NOVEMBER 25 2023; jun 22, 2024; 25th of November 2023'
    );
  });

  test('gives the rule both readings of day and month in numbers, and takes only a text for them', () => {
    const seen: [string[], boolean][] = [];
    const rewriter = new DateRewriter((readings, ambiguous) => {
      seen.push([readings.map((reading) => `${reading.year}-${reading.month}-${reading.day}`), ambiguous]);
      return ambiguous && readings.length === 1 ? { text: '[one]' } : { date: shiftDate(readings[0], -1) };
    });
    expect(rewriter.rewrite('04/03/2024, 28/11/2026, 11/28/2026, 11/11/2026')).toBe('04/03/2024, [one], [one], [one]');
    expect(seen).toEqual([
      [['2024-3-4', '2024-4-3'], true],
      [['2026-11-28'], true],
      [['2026-11-28'], true],
      [['2026-11-11'], true],
    ]);
  });

  test('leaves what is not a date: invalid days, partial dates, longer numbers, years alone', () => {
    const text = 'code 2024-02-30, month 2024-03, id 12024-01-05, year 2024, 2024-01-051, uuid a1f0c0de-0000-4000-8000-000000000301';
    expect(forward.rewrite(text)).toBe(text);
  });

  test('shifting back undoes shifting forward', () => {
    const backward = new DateRewriter(shiftBy(100));
    const text = 'seen March 4, 2024 and 2024-01-05T10:00:00Z, 4th of March 2024';
    expect(backward.rewrite(forward.rewrite(text))).toBe(text);
  });
});

describe('DateRewriter, one week back', () => {
  const week = new DateRewriter(shiftBy(-7));

  test("recognises every month's name and abbreviation, and writes the moved month's", () => {
    const names = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
    expect(week.rewrite(names.map((name) => `${name} 3, 2024`).join('; '))).toBe(
      'December 27, 2023; January 27, 2024; February 25, 2024; March 27, 2024; April 26, 2024; May 27, 2024; June 26, 2024; July 27, 2024; August 27, 2024; September 26, 2024; October 27, 2024; November 26, 2024'
    );
    // An abbreviation stays one; May, its own abbreviation, is written as a whole name.
    expect(week.rewrite(names.map((name) => `3 ${name.slice(0, 3)} 2024`).join(', '))).toBe(
      '27 Dec 2023, 27 Jan 2024, 25 Feb 2024, 27 Mar 2024, 26 April 2024, 27 May 2024, 26 Jun 2024, 27 Jul 2024, 27 Aug 2024, 26 Sep 2024, 27 Oct 2024, 26 Nov 2024'
    );
  });

  test("an ordinal follows the moved day: 1st, 2nd, 3rd, 11th to 13th, 21st, 22nd, 23rd, 31st", () => {
    const days = [
      ...['1st', '2nd', '3rd', '4th', '5th', '6th', '7th', '8th', '9th', '10th', '11th', '12th', '13th', '14th', '15th', '16th'],
      ...['17th', '18th', '19th', '20th', '21st', '22nd', '23rd', '24th', '25th', '26th', '27th', '28th', '29th', '30th', '31st'],
    ];
    // Each day of January 2024, written a week later (from 8 January to 7 February).
    const weekLater = days.map((_, index) => (index + 7 < 31 ? `${days[index + 7]} January 2024` : `${days[index + 7 - 31]} February 2024`));
    expect(week.rewrite(weekLater.join('; '))).toBe(days.map((day) => `${day} January 2024`).join('; '));
    expect(week.rewrite('January 8th, 2024; January 18th, 2024; Jan. 29th 2024; February 3rd, 2024')).toBe('January 1st, 2024; January 11th, 2024; Jan. 22nd 2024; January 27th, 2024');
  });

  test('keeps the padding of the day as written: two digits when it had a leading zero, as few as needed otherwise', () => {
    expect(week.rewrite('March 09, 2024; 09 March 2024; March 10, 2024; 10 March 2024')).toBe('March 02, 2024; 02 March 2024; March 3, 2024; 3 March 2024');
    // Year first, month and day are padded only when both were.
    expect(week.rewrite('2024-01-15, 2024-1-15, 2024-01-9, 2024/1/09')).toBe('2024-01-08, 2024-1-8, 2024-1-2, 2024/1/2');
  });

  test('leaves what only looks like a date: digits or letters around it, a day or month that does not exist, years before 1000', () => {
    // A rule that would replace any date at all, so that none can hide behind an ambiguous form.
    const marked = new DateRewriter(() => ({ text: '[date]' }));
    const text = '114/03/2024, 14/03/20245, 114 March 2024, 4 March 20245, March 4, 20245, dismay 4, 2024, 31/31/2024, 2024-13-01, 2024-04-31, 0001-01-01, 0099-12-31, 0999-06-15';
    expect(marked.rewrite(text)).toBe(text);
    // From 1000 on, a year is a year.
    expect(week.rewrite('1000-06-15')).toBe('1000-06-08');
  });

  test("the patient's birth date is the same day only: another year, month or day is another date", () => {
    const present = new TurnPresent(new Date('2026-11-28T10:00:00Z'), birthDateOf('1958-03-14'));
    expect(new DateRewriter(present.outgoing(-7)).rewrite('1958-03-14, 2024-03-14, 1958-04-14, 1958-03-15')).toBe('[age 68], 2024-03-07, 1958-04-07, 1958-03-08');
  });

  test('where each complete date is, so a stream never cuts through one', () => {
    const text = 'Seen 2024-01-05 and March 4, 2024; 04/03/2024, then 4th of March 2024.';
    const at = (date: string): [number, number] => [text.indexOf(date), text.indexOf(date) + date.length];
    expect(week.spans(text)).toEqual([at('2024-01-05'), at('March 4, 2024'), at('04/03/2024'), at('4th of March 2024')]);
    expect(week.spans('no dates, 2024 alone')).toEqual([]);
  });
});

describe('parseIsoDate and isoDate', () => {
  test("read a FHIR date's day, a dateTime's included; a partial date, an invalid one or text around it is none", () => {
    expect(parseIsoDate('1958-03-14')).toEqual({ year: 1958, month: 3, day: 14 });
    expect(parseIsoDate('1958-03-14T08:30:00Z')).toEqual({ year: 1958, month: 3, day: 14 });
    for (const text of [undefined, '', '1958', '1958-03', '1958-02-30', 'born 1958-03-14', '0001-01-01']) {
      expect([text, parseIsoDate(text)]).toEqual([text, undefined]);
    }
  });

  test('write a four-digit year and a two-digit month and day', () => {
    expect(isoDate({ year: 2026, month: 3, day: 5 })).toBe('2026-03-05');
    expect(isoDate({ year: 999, month: 12, day: 31 })).toBe('0999-12-31');
  });
});

describe('mayBeginDate', () => {
  test('holds what may still grow into a date, not plain words or finished text', () => {
    for (const tail of ['2', '2024', '2024-0', '2024-03-1', '2024-03-14', '14/03/19', 'Ma', 'March', 'March 4', 'March 4, 20', '4 Ma', '4th March 202', '4th of Ma', '4 o']) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, true]);
    }
    for (const tail of ['the', 'Maria', 'March 4, 2024 and', 'hello 2024', '2024\n']) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, false]);
    }
  });

  test('holds every partial form, whatever the spaces between its parts', () => {
    const partial = ['2024-', '2024-03', '14/', '14/03', '4th', '14 Ma', '4  Ma', '4 of', '4 of  Ma', '4 March  20', 'March ', 'March  4', 'March 14', 'March 4,  20', 'Sept 4'];
    for (const tail of [...partial, `4${' '.repeat(23)}`]) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, true]);
    }
  });

  test('releases what no date continues: longer numbers, text before or after a date, a word that is no month, a new line, 25 characters', () => {
    const finished = ['of', '12345', 'x2024-03', '2024-03-145', 'x14/03', '14/03/20245', '4 March 2024 and', '4 tablets', 'the March', 'Ma 4', 'Decem 4', '4\nMa'];
    for (const tail of [...finished, `4${' '.repeat(24)}`]) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, false]);
    }
  });
});
