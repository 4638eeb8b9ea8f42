import { AppError, finalError, isAppErrorCode, toAppError } from './errors.ts';

describe('AppError', () => {
  test('carries its status from the one table', () => {
    expect(new AppError('unauthenticated', 'no token').status).toBe(401);
    expect(new AppError('conversation_not_found', 'gone').status).toBe(404);
    expect(new AppError('rate_limited', 'slow down', { retryAfterSeconds: 2 }).retryAfterSeconds).toBe(2);
  });

  test('unknown failures become internal errors that do not repeat their message', () => {
    const wrapped = toAppError(new Error('database password is hunter2'));
    expect(wrapped.code).toBe('internal_error');
    expect(wrapped.message).not.toContain('hunter2');
    expect(wrapped.cause).toBeInstanceOf(Error);
  });

  test('isInstance recognises AppErrors only', () => {
    expect(AppError.isInstance(new AppError('forbidden', 'no'))).toBe(true);
    expect(AppError.isInstance(new Error('no'))).toBe(false);
    expect(AppError.isInstance({ code: 'forbidden' })).toBe(false);
  });

  test('finalError: the same failure, no longer one the client should retry; its Retry-After kept', () => {
    const cause = new Error('upstream said 503');
    const retryable = new AppError('upstream_error', 'The LLM provider failed.', { isRetryable: true, retryAfterSeconds: 3, details: { provider: 'openai' }, cause });
    const final = finalError(retryable);
    expect(final).toMatchObject({ code: 'upstream_error', status: 500, message: 'The LLM provider failed.', isRetryable: false, retryAfterSeconds: 3, details: { provider: 'openai' }, cause });
    const already = new AppError('invalid_request', 'no');
    expect(finalError(already)).toBe(already);
  });

  test('isAppErrorCode knows the table, nothing else', () => {
    expect(isAppErrorCode('upstream_timeout')).toBe(true);
    expect(isAppErrorCode('toString')).toBe(false);
    expect(isAppErrorCode(undefined)).toBe(false);
  });
});
