import { DecodedContentCache } from './content-cache.ts';
import { encodeContent } from './content-codec.ts';

const stored = (text: string) => encodeContent(JSON.stringify({ resourceType: 'Communication', text }));
const json = (text: string) => JSON.stringify({ resourceType: 'Communication', text });

describe('DecodedContentCache', () => {
  test('a version read again is answered from the cache, not inflated again', () => {
    const cache = new DecodedContentCache();
    expect(cache.decode(1, 'v1', stored('first'))).toBe(json('first'));
    // The same row and version: what was decoded the first time, whatever bytes are passed now.
    expect(cache.decode(1, 'v1', stored('other bytes'))).toBe(json('first'));
    // Another version of the row is its own entry.
    expect(cache.decode(1, 'v2', stored('second'))).toBe(json('second'));
  });

  test('at its bound the least recently used goes, and an entry read again stays', () => {
    const text = (letter: string) => letter.repeat(60);
    const cache = new DecodedContentCache(json(text('x')).length * 4);
    for (const [row, letter] of [[1, 'x'], [2, 'y'], [3, 'z'], [4, 'u']] as const) cache.decode(row, 'v', stored(text(letter)));
    // Row 1 is read again: now the most recent.
    expect(cache.decode(1, 'v', stored('changed'))).toBe(json(text('x')));
    // A fifth entry, written: row 2, the least recently used, makes room.
    cache.remember(5, 'v', json(text('w')));
    expect(cache.decode(1, 'v', stored('changed'))).toBe(json(text('x')));
    expect(cache.decode(3, 'v', stored('changed'))).toBe(json(text('z')));
    expect(cache.decode(5, 'v', stored('changed'))).toBe(json(text('w')));
    expect(cache.decode(2, 'v', stored('read again'))).toBe(json('read again'));
  });

  describe('once full, a version read is kept at one miss in eight', () => {
    const content = (label: string) => `${label} `.repeat(10);
    const entry = json(content('round 00 row 00')).length;
    /** Reads `rows` in turn, `rounds` times; a hit answers with the JSON of an earlier round, not the store's bytes now. */
    const hitsReading = (cache: DecodedContentCache, rows: readonly number[], rounds: number): number[] =>
      Array.from({ length: rounds }, (_, round) => {
        const label = (row: number) => `round ${String(round).padStart(2, '0')} row ${String(row).padStart(2, '0')}`;
        return rows.filter((row) => cache.decode(row, 'v', stored(content(label(row)))) !== json(content(label(row)))).length;
      });

    test('pages read in turn that outgrow the cache still hit what it holds', () => {
      // Room for 10 of the 30 records read in turn again and again (the pages of more conversations than fit). Keeping
      // every miss, each record is pushed out before it is read again: no round would hit at all.
      const cache = new DecodedContentCache(entry * 10);
      const hits = hitsReading(cache, Array.from({ length: 30 }, (_, row) => row), 20);
      expect(hits[0]).toBe(0);
      for (const roundHits of hits.slice(1)) expect(roundHits).toBeGreaterThanOrEqual(5);
    });

    test('a working set that fits comes in within a few reads of a cache full of others', () => {
      const cache = new DecodedContentCache(entry * 10);
      for (let row = 50; row < 60; row++) cache.decode(row, 'v', stored(content(`stale 00 row ${row}`)));
      // Each record missed comes in at one miss in eight: within eight reads of it, whichever order the misses come in.
      const hits = hitsReading(cache, [1, 2, 3, 4, 5], 40);
      expect(hits.slice(-10)).toEqual(Array(10).fill(5));
    });
  });

  test('a version written is remembered; one too large for a quarter of the bound is not kept', () => {
    const cache = new DecodedContentCache(400);
    cache.remember(7, 'v', json('written'));
    expect(cache.decode(7, 'v', stored('stale'))).toBe(json('written'));
    cache.remember(8, 'v', json('x'.repeat(200)));
    expect(cache.decode(8, 'v', stored('from the store'))).toBe(json('from the store'));
    // The small entry was not pushed out by the large one.
    expect(cache.decode(7, 'v', stored('stale'))).toBe(json('written'));
  });

  test('text rows of older stores are returned as they are', () => {
    const cache = new DecodedContentCache();
    expect(cache.decode(9, 'v', '{"resourceType":"Patient"}')).toBe('{"resourceType":"Patient"}');
  });
});
