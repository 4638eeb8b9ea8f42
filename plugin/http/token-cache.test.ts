import { createTokenCache } from './token-cache.ts';

const NOW = Date.UTC(2026, 10, 22, 7, 0, 0);
const HOUR = NOW / 1000 + 3600;

describe('createTokenCache', () => {
  let clock: number;
  const now = (): number => clock;
  const createCallerCache = (options: { ttlMs?: number; maxEntries?: number; now: () => number }) => createTokenCache<{ caller: string }>({ ttlMs: 5000, ...options });
  const cachedCaller = (): { caller: string } => ({ caller: 'Practitioner/p1' });

  beforeEach(() => {
    clock = NOW;
  });

  test('a token set is a hit; another token is a miss', () => {
    const cache = createCallerCache({ now });
    const caller = cachedCaller();
    cache.set('token-a', caller, HOUR);
    expect(cache.get('token-a')).toBe(caller);
    expect(cache.get('token-b')).toBeUndefined();
  });

  test('an entry ends after the TTL', () => {
    const cache = createCallerCache({ now, ttlMs: 5000 });
    cache.set('token-a', cachedCaller(), HOUR);
    clock += 4999;
    expect(cache.get('token-a')).toBeDefined();
    clock += 1;
    expect(cache.get('token-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  test("an entry ends when its token expires, even inside the TTL", () => {
    const cache = createCallerCache({ now, ttlMs: 60_000 });
    cache.set('token-a', cachedCaller(), NOW / 1000 + 2);
    clock += 1999;
    expect(cache.get('token-a')).toBeDefined();
    clock += 1;
    expect(cache.get('token-a')).toBeUndefined();
  });

  test('a full cache drops the least recently used entry', () => {
    const cache = createCallerCache({ now, maxEntries: 2 });
    cache.set('token-a', cachedCaller(), HOUR);
    cache.set('token-b', cachedCaller(), HOUR);
    expect(cache.get('token-a')).toBeDefined(); // b is now the least recently used
    cache.set('token-c', cachedCaller(), HOUR);
    expect(cache.size).toBe(2);
    expect(cache.get('token-b')).toBeUndefined();
    expect(cache.get('token-a')).toBeDefined();
    expect(cache.get('token-c')).toBeDefined();
  });

  test('delete and clear forget callers', () => {
    const cache = createCallerCache({ now });
    cache.set('token-a', cachedCaller(), HOUR);
    cache.set('token-b', cachedCaller(), HOUR);
    cache.delete('token-a');
    expect(cache.get('token-a')).toBeUndefined();
    cache.clear();
    expect(cache.size).toBe(0);
  });

  test('a token without an expiry is not kept', () => {
    const cache = createCallerCache({ now });
    cache.set('token-a', cachedCaller(), undefined);
    expect(cache.get('token-a')).toBeUndefined();
  });

  test('a TTL of 0 keeps nothing', () => {
    const cache = createCallerCache({ now, ttlMs: 0 });
    cache.set('token-a', cachedCaller(), HOUR);
    expect(cache.get('token-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});
