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
    // A fifth entry: row 2, the least recently used, makes room.
    cache.decode(5, 'v', stored(text('w')));
    expect(cache.decode(1, 'v', stored('changed'))).toBe(json(text('x')));
    expect(cache.decode(3, 'v', stored('changed'))).toBe(json(text('z')));
    expect(cache.decode(2, 'v', stored('read again'))).toBe(json('read again'));
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
