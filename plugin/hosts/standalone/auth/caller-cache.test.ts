import type { CallerContext } from '../../../host.ts';
import type { AccessTokenClaims } from './access-tokens.ts';
import { createCallerCache, DEFAULT_CALLER_TTL_MS, type CachedCaller } from './caller-cache.ts';

describe('createCallerCache', () => {
  test('a resolved caller is kept for 5 s by default', () => {
    let clock = Date.UTC(2026, 10, 22, 7, 0, 0);
    const claims: AccessTokenClaims = { login_id: 'l1', sub: 'u1', username: 'u1', scope: 'openid', profile: 'Practitioner/p1', exp: clock / 1000 + 3600 };
    const caller: CachedCaller = { claims, context: { project: { id: 'project-a' } } as unknown as CallerContext };
    const cache = createCallerCache({ now: () => clock });
    cache.set('token-a', caller, claims.exp);
    clock += DEFAULT_CALLER_TTL_MS - 1;
    expect(cache.get('token-a')).toBe(caller);
    clock += 1;
    expect(cache.get('token-a')).toBeUndefined();
  });
});
