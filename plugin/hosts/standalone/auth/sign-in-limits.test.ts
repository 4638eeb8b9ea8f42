import { randomUUID } from 'node:crypto';
import { createLimiterStore } from '../../../devices/limiter-store.ts';
import { describeWithRedis, twoInstancesOnRedis } from '../../../../test/support/redis.ts';
import { createSignInLimiter, type SignInAttempt, type SignInLimiter } from './sign-in-limits.ts';

const LIMITS = { perSource: 5, perAccount: 3, windowSeconds: 60, lockoutSeconds: 120 };

/** What each attempt is answered: 'checked' (its password is hashed and wrong: 400) or 429, as the route does. */
async function failAll(limiter: SignInLimiter, attempts: readonly SignInAttempt[]): Promise<(number | 'checked')[]> {
  const answers: (number | 'checked')[] = [];
  for (const attempt of attempts) {
    const refused = (await limiter.check(attempt)) ?? (await limiter.failed(attempt));
    answers.push(refused ? refused.status : 'checked');
  }
  return answers;
}

const repeat = <T>(value: T, times: number): T[] => Array.from({ length: times }, () => value);

describe('createSignInLimiter', () => {
  test('a source past its limit is locked out of every sign-in, the right password and other accounts too; other sources are not', async () => {
    const limiter = createSignInLimiter(LIMITS, createLimiterStore(undefined));
    const source = `10.0.0.${randomUUID()}`;
    const answers = await failAll(limiter, Array.from({ length: 7 }, (_, index) => ({ sourceAddress: source, email: `nobody-${index}@example.test` })));

    expect(answers).toEqual(['checked', 'checked', 'checked', 'checked', 'checked', 429, 429]);
    const lockout = await limiter.check({ sourceAddress: source, email: 'owner@example.test' });
    expect(lockout).toMatchObject({ code: 'rate_limited', status: 429, message: 'Too many failed attempts; try again later.' });
    expect(lockout?.retryAfterSeconds).toBeGreaterThan(LIMITS.windowSeconds);
    expect(lockout?.retryAfterSeconds).toBeLessThanOrEqual(LIMITS.lockoutSeconds);
    expect(await limiter.check({ sourceAddress: `10.0.1.${randomUUID()}`, email: 'owner@example.test' })).toBeUndefined();
  });

  test('an account past its limit is locked out to the sources that failed on it, not to one that never did', async () => {
    const limiter = createSignInLimiter(LIMITS, createLimiterStore(undefined));
    const email = `owner-${randomUUID()}@example.test`;
    const strangers = Array.from({ length: 5 }, (_, index) => ({ sourceAddress: `10.2.0.${index}-${randomUUID()}`, email }));

    // One failure each from five sources: none reaches its own limit, the account reaches its own.
    expect(await failAll(limiter, strangers)).toEqual(['checked', 'checked', 'checked', 429, 429]);
    for (const stranger of strangers) {
      expect(await limiter.check(stranger)).toMatchObject({ status: 429 });
    }
    const owner = { sourceAddress: `10.3.0.${randomUUID()}`, email };
    expect(await limiter.check(owner)).toBeUndefined();
    // A failure from the owner's source during the lockout: counted, refused, and that source is locked out of it too.
    expect(await limiter.failed(owner)).toMatchObject({ status: 429 });
    expect(await limiter.check(owner)).toMatchObject({ status: 429 });
  });

  test('e-mails are accounts whatever their case or spaces; an unknown one is counted like any other', async () => {
    const limiter = createSignInLimiter(LIMITS, createLimiterStore(undefined));
    const email = `Somebody-${randomUUID()}@Example.test`;
    const spellings = [email, email.toLowerCase(), ` ${email.toUpperCase()} `];
    const answers = await failAll(limiter, spellings.map((spelling, index) => ({ sourceAddress: `10.4.0.${index}`, email: spelling })));
    expect(answers).toEqual(['checked', 'checked', 'checked']);
    expect(await limiter.failed({ sourceAddress: '10.4.0.9', email: email.toLowerCase() })).toMatchObject({ status: 429 });
  });
});

describeWithRedis('createSignInLimiter on Redis', () => {
  // Two clients stand for two server instances sharing one Redis; connected, as a running server's are.
  const redis = twoInstancesOnRedis();

  test("two instances share a source's failures and its lockout", async () => {
    const keyPrefix = `fhirgate:test:${randomUUID()}:`;
    const first = createSignInLimiter(LIMITS, createLimiterStore(redis.first), { keyPrefix });
    const second = createSignInLimiter(LIMITS, createLimiterStore(redis.second), { keyPrefix });
    const source = `203.0.113.${randomUUID()}`;
    const attempt = (index: number): SignInAttempt => ({ sourceAddress: source, email: `nobody-${index}@example.test` });

    expect(await failAll(first, [attempt(1), attempt(2), attempt(3)])).toEqual(['checked', 'checked', 'checked']);
    expect(await failAll(second, [attempt(4), attempt(5), attempt(6)])).toEqual(['checked', 'checked', 429]);
    expect(await first.check({ sourceAddress: source, email: 'owner@example.test' })).toMatchObject({ status: 429 });
  });
});
