import { describe, expect, test } from '@jest/globals';
import {
  createAbortError,
  createUpstreamError,
  describeTransportFailure,
  isAbortError,
  readRetryAfterSeconds,
} from './provider-errors.ts';

describe('createUpstreamError', () => {
  test('maps HTTP statuses onto codes, retryability and details', () => {
    const cases = [
      [500, 'upstream_error', true, 'http_status'],
      [503, 'upstream_error', true, 'http_status'],
      [408, 'upstream_error', true, 'http_status'],
      [429, 'upstream_error', true, 'rate_limited'],
      [400, 'upstream_error', false, 'http_status'],
      [404, 'upstream_error', false, 'http_status'],
      [401, 'upstream_error', false, 'credentials_rejected'],
      [403, 'upstream_error', false, 'credentials_rejected'],
    ] as const;
    for (const [status, code, isRetryable, reason] of cases) {
      const error = createUpstreamError('openai', { kind: 'http', status });
      expect(error).toMatchObject({ code, status: 500, isRetryable, details: { provider: 'openai', upstreamStatus: status, reason } });
    }
  });

  test('keeps Retry-After for rate limits and server errors only', () => {
    expect(createUpstreamError('p', { kind: 'http', status: 429, retryAfterSeconds: 3 }).retryAfterSeconds).toBe(3);
    expect(createUpstreamError('p', { kind: 'http', status: 503, retryAfterSeconds: 4 }).retryAfterSeconds).toBe(4);
    expect(createUpstreamError('p', { kind: 'http', status: 400, retryAfterSeconds: 5 }).retryAfterSeconds).toBeUndefined();
  });

  test('copies upstream identifiers, never free text', () => {
    const error = createUpstreamError('openai', {
      kind: 'http',
      status: 400,
      type: 'invalid_request_error',
      code: 'context_length_exceeded',
      requestId: 'req_123',
    });
    const freeText = createUpstreamError('openai', { kind: 'http', status: 400, type: 'The patient John Doe has', code: 'x'.repeat(500) });

    expect(error.details).toMatchObject({ upstreamType: 'invalid_request_error', upstreamCode: 'context_length_exceeded', upstreamRequestId: 'req_123' });
    expect(error.message).toBe("The LLM provider 'openai' refused the request with HTTP 400 (context_length_exceeded).");
    expect(freeText.details).not.toHaveProperty('upstreamType');
    expect(freeText.details).not.toHaveProperty('upstreamCode');
    expect(JSON.stringify([freeText.message, String(freeText.cause)])).not.toContain('John');
  });

  test('transport failures, timeouts and stream failures', () => {
    expect(createUpstreamError('p', { kind: 'timeout' }, 3000)).toMatchObject({
      code: 'upstream_timeout',
      status: 500,
      isRetryable: true,
      message: "The LLM provider 'p' did not answer within 3000 ms.",
    });
    expect(createUpstreamError('p', { kind: 'connection' })).toMatchObject({ code: 'upstream_error', isRetryable: true });
    expect(createUpstreamError('p', { kind: 'stream_cut' })).toMatchObject({ isRetryable: true });
    expect(createUpstreamError('p', { kind: 'stream_incomplete' })).toMatchObject({ isRetryable: true });
    expect(createUpstreamError('p', { kind: 'malformed_response' })).toMatchObject({ isRetryable: false });
    expect(createUpstreamError('p', { kind: 'unknown', errorName: 'RangeError' })).toMatchObject({ isRetryable: false });
    expect(createUpstreamError('p', { kind: 'stream_error', type: 'overloaded_error' })).toMatchObject({
      isRetryable: true,
      details: { upstreamType: 'overloaded_error' },
    });
    expect(createUpstreamError('p', { kind: 'stream_error', type: 'invalid_request_error' }).isRetryable).toBe(false);
  });

  test('the cause is a summary that is safe to log', () => {
    const error = createUpstreamError('openai', { kind: 'http', status: 429, type: 'requests', code: 'rate_limit_exceeded' });

    expect(error.cause).toBeInstanceOf(Error);
    expect(String(error.cause)).toBe("UpstreamFailure: LLM provider 'openai': HTTP 429 (requests/rate_limit_exceeded)");
  });
});

describe('readRetryAfterSeconds', () => {
  const headers = (entries: Record<string, string>): Headers => new Headers(entries);

  test('reads seconds, milliseconds and HTTP dates', () => {
    const now = Date.parse('2025-06-01T12:00:00Z');

    expect(readRetryAfterSeconds(headers({ 'retry-after': '7' }))).toBe(7);
    expect(readRetryAfterSeconds(headers({ 'retry-after-ms': '1500', 'retry-after': '9' }))).toBe(1.5);
    expect(readRetryAfterSeconds(headers({ 'retry-after': 'Sun, 01 Jun 2025 12:00:30 GMT' }), now)).toBe(30);
    expect(readRetryAfterSeconds(headers({ 'retry-after': 'Sun, 01 Jun 2025 11:00:00 GMT' }), now)).toBe(0);
  });

  test('is undefined when absent or unreadable', () => {
    expect(readRetryAfterSeconds(undefined)).toBeUndefined();
    expect(readRetryAfterSeconds(headers({}))).toBeUndefined();
    expect(readRetryAfterSeconds(headers({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(readRetryAfterSeconds(headers({ 'retry-after': '-3' }))).toBeUndefined();
  });
});

describe('describeTransportFailure', () => {
  test('recognises undici and JSON failures by name and message', () => {
    expect(describeTransportFailure(new TypeError('terminated'))).toEqual({ kind: 'stream_cut' });
    expect(describeTransportFailure(new TypeError('fetch failed'))).toEqual({ kind: 'connection' });
    expect(describeTransportFailure(Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }))).toEqual({ kind: 'connection' });
    expect(describeTransportFailure(new SyntaxError('Unexpected end of JSON input'))).toEqual({ kind: 'malformed_response' });
    expect(describeTransportFailure(new DOMException('late', 'TimeoutError'))).toEqual({ kind: 'timeout' });
    expect(describeTransportFailure(new Error('something else'))).toBeUndefined();
    expect(describeTransportFailure('terminated')).toBeUndefined();
  });
});

describe('abort errors', () => {
  test('an abort is a DOMException named AbortError carrying the signal reason', () => {
    const controller = new AbortController();
    const reason = new Error('client went away');
    controller.abort(reason);
    const error = createAbortError(controller.signal);

    expect(error.name).toBe('AbortError');
    expect(error.cause).toBe(reason);
    expect(isAbortError(error)).toBe(true);
    expect(isAbortError(new Error('AbortError'))).toBe(false);
    expect(isAbortError(undefined)).toBe(false);
  });
});
