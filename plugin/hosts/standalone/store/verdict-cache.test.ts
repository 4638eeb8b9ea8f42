/**
 * The verdicts kept of searches' conditions: by row and version, by condition, and bounded. What they save a search
 * and that an answer never comes from a stale one: verdict-search.test.ts.
 */
import { VerdictCache } from './verdict-cache.ts';

const HOLDS = { sql: 'EXISTS (SELECT 1)', params: ['Patient/p1'] };

test('a verdict is given back for the version it was kept for, never for another version of the row', () => {
  const verdicts = new VerdictCache().of(HOLDS);
  verdicts.set(7, 'v1', true);
  expect(verdicts.get(7, 'v1')).toBe(true);
  expect(verdicts.get(7, 'v2')).toBeUndefined();
  expect(verdicts.get(8, 'v1')).toBeUndefined();
});

test('a condition with other parameters has verdicts of its own; the same condition again finds them', () => {
  const cache = new VerdictCache();
  cache.of(HOLDS).set(7, 'v1', true);
  expect(cache.of({ ...HOLDS, params: ['Patient/p2'] }).get(7, 'v1')).toBeUndefined();
  expect(cache.of({ ...HOLDS, sql: 'NOT EXISTS (SELECT 1)' }).get(7, 'v1')).toBeUndefined();
  expect(cache.of({ sql: HOLDS.sql, params: ['Patient/p1'] }).get(7, 'v1')).toBe(true);
});

test('past its bound the conditions used least recently are forgotten whole, and the count stays within it', () => {
  const cache = new VerdictCache(10);
  const first = cache.of({ sql: 'a', params: [] });
  const second = cache.of({ sql: 'b', params: [] });
  for (let pk = 0; pk < 6; pk++) first.set(pk, 'v', true);
  for (let pk = 0; pk < 4; pk++) second.set(pk, 'v', false);
  expect(cache.size).toBe(10);
  cache.of({ sql: 'a', params: [] }); // now the most recently used
  second.set(4, 'v', false);
  // `second` was the least recently used condition when the bound was passed: it went whole.
  expect(cache.size).toBe(6);
  expect(cache.of({ sql: 'b', params: [] }).get(0, 'v')).toBeUndefined();
  expect(cache.of({ sql: 'a', params: [] }).get(0, 'v')).toBe(true);
  // A search still holding the forgotten condition keeps nothing more in it.
  second.set(5, 'v', true);
  expect(second.get(5, 'v')).toBeUndefined();
  expect(cache.size).toBe(6);
});

test('one condition alone past the bound starts again', () => {
  const cache = new VerdictCache(4);
  const only = cache.of(HOLDS);
  for (let pk = 0; pk < 5; pk++) only.set(pk, 'v', true);
  expect(cache.size).toBeLessThanOrEqual(4);
  expect(only.get(0, 'v')).toBeUndefined();
});

test('cleared, nothing is known, and conditions handed out before keep nothing more', () => {
  const cache = new VerdictCache();
  const verdicts = cache.of(HOLDS);
  verdicts.set(1, 'v', true);
  cache.clear();
  expect(cache.size).toBe(0);
  expect(cache.of(HOLDS).get(1, 'v')).toBeUndefined();
  verdicts.set(2, 'v', true);
  expect(cache.size).toBe(0);
});

test('the conditions it knows are bounded too, with or without verdicts: the least recently used goes first', () => {
  const cache = new VerdictCache(100, 2);
  const first = cache.of({ sql: 'a', params: [] });
  first.set(1, 'v', true);
  cache.of({ sql: 'b', params: [] }); // no verdict yet
  cache.of({ sql: 'a', params: [] });
  cache.of({ sql: 'c', params: [] }); // `b` goes, the least recently used
  expect(cache.of({ sql: 'a', params: [] }).get(1, 'v')).toBe(true);
  cache.of({ sql: 'd', params: [] }); // now `c`
  cache.of({ sql: 'e', params: [] }); // and `a`
  expect(cache.of({ sql: 'a', params: [] }).get(1, 'v')).toBeUndefined();
  expect(cache.size).toBe(0);
});
