import type { CallerContext } from '../../../host.ts';
import type { AccessTokenClaims } from './access-tokens.ts';
import { createCallerCache, type CachedCaller } from './caller-cache.ts';

const NOW = Date.UTC(2026, 10, 22, 7, 0, 0);

function cachedCaller(expiresInSeconds = 3600): CachedCaller {
  const claims: AccessTokenClaims = { login_id: 'l1', sub: 'u1', username: 'u1', scope: 'openid', profile: 'Practitioner/p1', exp: NOW / 1000 + expiresInSeconds };
  return { claims, context: { project: { id: 'project-a' } } as unknown as CallerContext };
}

describe('createCallerCache', () => {
  let clock: number;
  const now = (): number => clock;

  beforeEach(() => {
    clock = NOW;
  });

  test('a token set is a hit; another token is a miss', () => {
    const cache = createCallerCache({ now });
    const caller = cachedCaller();
    cache.set('token-a', caller);
    expect(cache.get('token-a')).toBe(caller);
    expect(cache.get('token-b')).toBeUndefined();
  });

  test('an entry ends after the TTL', () => {
    const cache = createCallerCache({ now, ttlMs: 5000 });
    cache.set('token-a', cachedCaller());
    clock += 4999;
    expect(cache.get('token-a')).toBeDefined();
    clock += 1;
    expect(cache.get('token-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  test("an entry ends when its token expires, even inside the TTL", () => {
    const cache = createCallerCache({ now, ttlMs: 60_000 });
    cache.set('token-a', cachedCaller(2));
    clock += 1999;
    expect(cache.get('token-a')).toBeDefined();
    clock += 1;
    expect(cache.get('token-a')).toBeUndefined();
  });

  test('a full cache drops the least recently used entry', () => {
    const cache = createCallerCache({ now, maxEntries: 2 });
    cache.set('token-a', cachedCaller());
    cache.set('token-b', cachedCaller());
    expect(cache.get('token-a')).toBeDefined(); // b is now the least recently used
    cache.set('token-c', cachedCaller());
    expect(cache.size).toBe(2);
    expect(cache.get('token-b')).toBeUndefined();
    expect(cache.get('token-a')).toBeDefined();
    expect(cache.get('token-c')).toBeDefined();
  });

  test('delete and clear forget callers', () => {
    const cache = createCallerCache({ now });
    cache.set('token-a', cachedCaller());
    cache.set('token-b', cachedCaller());
    cache.delete('token-a');
    expect(cache.get('token-a')).toBeUndefined();
    cache.clear();
    expect(cache.size).toBe(0);
  });

  test('a TTL of 0 keeps nothing', () => {
    const cache = createCallerCache({ now, ttlMs: 0 });
    cache.set('token-a', cachedCaller());
    expect(cache.get('token-a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});
