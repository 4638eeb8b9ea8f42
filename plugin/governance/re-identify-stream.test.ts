import { Pseudonymizer } from './de-identify-text.ts';
import { StreamReIdentifier } from './re-identify-stream.ts';
import { IDENTIFIED_PATIENT, TURN_TIME } from './de-identify-text.test.ts';

describe('StreamReIdentifier', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100, TURN_TIME);
  const reply = 'Ms. [FAMILY-2] ([GIVEN-1]) was born [age 68]; call [PHONE-1]. Seen November 25, 2023, 2023/9/27, [today], [12 days ago] and [in 3 days]. Fine.';
  const whole = pseudonyms.reIdentify(reply);

  /** What the caller reads of `text` streamed in two chunks cut at each place in turn, and one character a chunk: each different reading once. */
  function readingsOf(text: string): string[] {
    const readings = new Set<string>();
    for (let cut = 0; cut <= text.length; cut++) {
      const stream = new StreamReIdentifier(pseudonyms);
      readings.add(stream.push(text.slice(0, cut)) + stream.push(text.slice(cut)) + stream.flush());
    }
    const stream = new StreamReIdentifier(pseudonyms);
    readings.add([...text].map((character) => stream.push(character)).join('') + stream.flush());
    return [...readings];
  }

  test('a reply cut anywhere, into two or into single characters, comes out as the whole reply re-identified', () => {
    expect(whole).toBe('Ms. López (María) was born 1958-03-14; call +1 (555) 010-0199. Seen March 4, 2024, 2024/1/5, 2026-11-28, 2026-11-16 and 2026-12-01. Fine.');
    expect(readingsOf(reply)).toEqual([whole]);
  });

  test('a date right after another, as an interval or a range, is re-identified however the reply is cut', () => {
    // `2023-11-01/` ends in a date's digits and a separator, as the middle of a numeric date does: the second date
    // still begins there.
    const interval = 'Admitted 2023-11-01/2023-11-25, moved 2023-11-01-2023-11-25.';
    expect(readingsOf(interval)).toEqual(['Admitted 2024-02-09/2024-03-04, moved 2024-02-09-2024-03-04.']);
  });

  test('a date whose end could begin another date is released whole, never cut in two', () => {
    // `2023.` could begin `2023.11.25`, yet it ends `November 25, 2023`: the text is held from `November` on.
    const stream = new StreamReIdentifier(pseudonyms);
    const out = [stream.push('Seen November '), stream.push('25, 2023.'), stream.push(' Fine.'), stream.flush()];
    expect(out.join('')).toBe('Seen March 4, 2024. Fine.');
  });

  test('a date at the start of a line, after a line ending in a number, is held until it is whole', () => {
    const stream = new StreamReIdentifier(pseudonyms);
    expect(stream.push('HbA1c 6.1\n2023-1')).toBe('HbA1c 6.1\n');
    expect(stream.push('1-25: 6.4 %')).toBe('2024-03-04: 6.4 %');
  });

  test('holds back no more than a pseudonym or a date: plain text goes out at once', () => {
    const stream = new StreamReIdentifier(pseudonyms);
    expect(stream.push('The patient is stable ')).toBe('The patient is stable ');
    expect(stream.push('and [FAM')).toBe('and ');
    expect(stream.push('ILY-2] is')).toBe('López is');
    expect(stream.push(' fine since 2023-1')).toBe(' fine since ');
    // A whole date waits for the character after it: `2023-11-25` could still be the start of `2023-11-251`.
    expect(stream.push('1-25')).toBe('');
    expect(stream.push('.')).toBe('2024-03-04.');
    expect(stream.push(' Seen [3 day')).toBe(' Seen ');
    expect(stream.push('s ago] too')).toBe('2026-11-25 too');
  });

  test('a pseudonym that ends a chunk goes out with it; one written right after it is held until it is whole', () => {
    const stream = new StreamReIdentifier(pseudonyms);
    expect(stream.push('Ms. [FAMILY-2]')).toBe('Ms. López');
    expect(stream.push(' ([GIVEN-1][FAM')).toBe(' (María');
    expect(stream.push('ILY-2]).')).toBe('López).');
  });

  test('the end of the stream releases what is held, once: told twice, or followed by more text, it repeats nothing', () => {
    // The model adapter ends the text at the model's finish, and again if the provider then fails.
    const stream = new StreamReIdentifier(pseudonyms);
    expect(stream.push('Call [GIVEN-1] or [FAM')).toBe('Call María or ');
    expect(stream.flush()).toBe('[FAM');
    expect(stream.flush()).toBe('');
    expect(stream.push('Fine.')).toBe('Fine.');
    expect(stream.flush()).toBe('');
  });
});
