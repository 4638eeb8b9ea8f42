import { DateRewriter, dateShiftDays, mayBeginDate, shiftDate, type DateRule } from './de-identify-dates.ts';

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

describe('mayBeginDate', () => {
  test('holds what may still grow into a date, not plain words or finished text', () => {
    for (const tail of ['2', '2024', '2024-0', '2024-03-1', '2024-03-14', '14/03/19', 'Ma', 'March', 'March 4', 'March 4, 20', '4 Ma', '4th March 202', '4th of Ma', '4 o']) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, true]);
    }
    for (const tail of ['the', 'Maria', 'March 4, 2024 and', 'hello 2024', '2024\n']) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, false]);
    }
  });
});
