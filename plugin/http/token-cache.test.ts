import { createTokenCache } from './token-cache.ts';

const NOW = Date.UTC(2026, 10, 22, 7, 0, 0);
const HOUR = NOW / 1000 + 3600;

describe('createTokenCache', () => {
  let clock: number;
  const now = (): number => clock;
  const createCache = (options: { ttlMs?: number; maxEntries?: number; now: () => number }) => createTokenCache<{ caller: string }>({ ttlMs: 5000, ...options });
  const verifiedValue = (): { caller: string } => ({ caller: 'Practitioner/p1' });

  beforeEach(() => {
    clock = NOW;
  });

  test('a token set is a hit; another token is a miss', () => {
    const cache = createCache({ now });
    const value = verifiedValue();
    cache.set('token-a', value, HOUR);
    expect(cache.get('token-a')).toBe(value);
    expect(cache.get('token-b')).toBeUndefined();
  });

  test('an entry ends after the TTL', () => {
    const cache = createCache({ now, ttlMs: 5000 });
    cache.set('token-a', verifiedValue(), HOUR);
    clock += 4999;
    expect(cache.get('token-a')).toBeDefined();
    clock += 1;
    expect(cache.get('token-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  test("an entry ends when its token expires, even inside the TTL", () => {
    const cache = createCache({ now, ttlMs: 60_000 });
    cache.set('token-a', verifiedValue(), NOW / 1000 + 2);
    clock += 1999;
    expect(cache.get('token-a')).toBeDefined();
    clock += 1;
    expect(cache.get('token-a')).toBeUndefined();
  });

  test('a full cache drops the least recently used entry', () => {
    const cache = createCache({ now, maxEntries: 2 });
    cache.set('token-a', verifiedValue(), HOUR);
    cache.set('token-b', verifiedValue(), HOUR);
    expect(cache.get('token-a')).toBeDefined(); // b is now the least recently used
    cache.set('token-c', verifiedValue(), HOUR);
    expect(cache.size).toBe(2);
    expect(cache.get('token-b')).toBeUndefined();
    expect(cache.get('token-a')).toBeDefined();
    expect(cache.get('token-c')).toBeDefined();
  });

  test('delete and clear forget entries', () => {
    const cache = createCache({ now });
    cache.set('token-a', verifiedValue(), HOUR);
    cache.set('token-b', verifiedValue(), HOUR);
    cache.delete('token-a');
    expect(cache.get('token-a')).toBeUndefined();
    cache.clear();
    expect(cache.size).toBe(0);
  });

  test('a token without an expiry is not kept', () => {
    const cache = createCache({ now });
    cache.set('token-a', verifiedValue(), undefined);
    expect(cache.get('token-a')).toBeUndefined();
  });

  test('a TTL of 0 keeps nothing', () => {
    const cache = createCache({ now, ttlMs: 0 });
    cache.set('token-a', verifiedValue(), HOUR);
    expect(cache.get('token-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});
