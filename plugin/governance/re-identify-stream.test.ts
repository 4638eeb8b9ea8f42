import { Pseudonymizer } from './de-identify-text.ts';
import { StreamReIdentifier } from './re-identify-stream.ts';
import { IDENTIFIED_PATIENT, TURN_TIME } from './de-identify-text.test.ts';

describe('StreamReIdentifier', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100, TURN_TIME);
  const reply = 'Ms. [FAMILY-2] ([GIVEN-1]) was born [age 68]; call [PHONE-1]. Seen November 25, 2023, 2023/9/27, [today], [12 days ago] and [in 3 days]. Fine.';
  const whole = pseudonyms.reIdentify(reply);

  test('a reply cut anywhere, into two or into single characters, comes out as the whole reply re-identified', () => {
    expect(whole).toBe('Ms. López (María) was born 1958-03-14; call +1 (555) 010-0199. Seen March 4, 2024, 2024/1/5, 2026-11-28, 2026-11-16 and 2026-12-01. Fine.');
    for (let cut = 0; cut <= reply.length; cut++) {
      const stream = new StreamReIdentifier(pseudonyms);
      const out = [stream.push(reply.slice(0, cut)), stream.push(reply.slice(cut)), stream.flush()];
      expect([cut, out.join('')]).toEqual([cut, whole]);
    }
    const stream = new StreamReIdentifier(pseudonyms);
    const pieces = [...reply].map((character) => stream.push(character));
    expect(pieces.join('') + stream.flush()).toBe(whole);
  });

  test('a date whose end could begin another date is released whole, never cut in two', () => {
    // `2023.` could begin `2023.11.25`, yet it ends `November 25, 2023`: the text is held from `November` on.
    const stream = new StreamReIdentifier(pseudonyms);
    const out = [stream.push('Seen November '), stream.push('25, 2023.'), stream.push(' Fine.'), stream.flush()];
    expect(out.join('')).toBe('Seen March 4, 2024. Fine.');
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
});
