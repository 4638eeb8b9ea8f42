import { DateShifter, dateShiftDays, mayBeginDate, parseIsoDate, shiftDate } from './de-identify-dates.ts';

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

describe('DateShifter', () => {
  const birth = parseIsoDate('1958-03-14');
  const forward = new DateShifter(-100, birth);

  test('moves year-first dates in every separator and padding, with or without a time', () => {
    expect(forward.shift('seen 2024-01-05, 2024-01-05T10:00:00Z, 2024/1/5 and 2024.01.05')).toBe('seen 2023-09-27, 2023-09-27T10:00:00Z, 2023/9/27 and 2023.09.27');
    // FHIR search prefixes stay on the date they qualify.
    expect(forward.shift('{"date":"ge2024-03-01"}')).toBe('{"date":"ge2023-11-22"}');
  });

  test('moves dates written with a month name, keeping their style', () => {
    expect(forward.shift('March 4, 2024; 4 March 2024; 4th Mar. 2024; MARCH 4 2024; sept 30, 2024')).toBe(
      'November 25, 2023; 25 November 2023; 25th Nov. 2023; NOVEMBER 25 2023; jun 22, 2024'
    );
  });

  test('leaves ambiguous day/month numbers as written, except the birth date in either order', () => {
    expect(forward.shift('visit 04/03/2024, born 14/03/1958 or 03/14/1958 or 14.03.1958')).toBe('visit 04/03/2024, born 04/12/1957 or 12/04/1957 or 04.12.1957');
  });

  test('leaves what is not a date: invalid days, partial dates, longer numbers, years alone', () => {
    const text = 'code 2024-02-30, month 2024-03, id 12024-01-05, year 2024, 2024-01-051, uuid a1f0c0de-0000-4000-8000-000000000301';
    expect(forward.shift(text)).toBe(text);
  });

  test('shifting back undoes shifting forward, the birth date included', () => {
    const backward = new DateShifter(100, shiftDate(birth!, -100));
    const text = 'born 1958-03-14 (14/03/1958), seen March 4, 2024 and 2024-01-05T10:00:00Z';
    expect(backward.shift(forward.shift(text))).toBe(text);
  });
});

describe('mayBeginDate', () => {
  test('holds what may still grow into a date, not plain words or finished text', () => {
    for (const tail of ['2', '2024', '2024-0', '2024-03-1', '2024-03-14', '14/03/19', 'Ma', 'March', 'March 4', 'March 4, 20', '4 Ma', '4th March 202']) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, true]);
    }
    for (const tail of ['the', 'Maria', 'March 4, 2024 and', 'hello 2024', '2024\n']) {
      expect([tail, mayBeginDate(tail)]).toEqual([tail, false]);
    }
  });
});
