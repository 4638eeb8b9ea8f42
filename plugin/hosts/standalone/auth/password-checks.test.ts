import { AppError } from '../../../errors.ts';
import { PasswordChecks } from './password-checks.ts';
import { hashPassword } from './passwords.ts';

describe('PasswordChecks', () => {
  let hash: string;

  beforeAll(async () => {
    hash = await hashPassword('the right one');
  });

  test('checks as verifyPassword does: the right password, a wrong one, no user at all', async () => {
    const checks = new PasswordChecks();
    expect(await checks.verify('the right one', hash)).toBe(true);
    expect(await checks.verify('a wrong one', hash)).toBe(false);
    expect(await checks.verify('the right one', undefined)).toBe(false);
  });

  test('at most maxConcurrent run at once; a few wait their turn, the rest are refused at once with 429', async () => {
    const checks = new PasswordChecks({ maxConcurrent: 1, maxWaiting: 2, maxWaitMs: 30_000 });
    let mostRunning = 0;
    const watching = setInterval(() => {
      mostRunning = Math.max(mostRunning, checks.running);
    }, 1);
    const outcomes = await Promise.allSettled(Array.from({ length: 5 }, () => checks.verify('a wrong one', hash)));
    clearInterval(watching);

    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'rejected']);
    expect(mostRunning).toBe(1);
    const refusal = (outcomes[3] as PromiseRejectedResult).reason as AppError;
    expect(AppError.isInstance(refusal)).toBe(true);
    expect(refusal).toMatchObject({ code: 'rate_limited', status: 429, retryAfterSeconds: 1, isRetryable: true, details: { limit: 'password_checks' } });
    // Every place is given back.
    expect(checks.running).toBe(0);
    expect(await checks.verify('the right one', hash)).toBe(true);
  });

  test('a check that waits longer than maxWaitMs is refused, and leaves the queue', async () => {
    const checks = new PasswordChecks({ maxConcurrent: 1, maxWaiting: 4, maxWaitMs: 1 });
    const outcomes = await Promise.allSettled([checks.verify('a', hash), checks.verify('b', hash), checks.verify('c', hash)]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect(checks.running).toBe(0);
    expect(await checks.verify('the right one', hash)).toBe(true);
  });
});
