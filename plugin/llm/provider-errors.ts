/**
 * Provider failures as AppErrors: the one table from what went wrong upstream to fhirgate's error vocabulary.
 * Each adapter describes its SDK's error as an `UpstreamFailure`; this file turns that into the AppError.
 *
 * | upstream                                      | code             | status | isRetryable | details.reason           |
 * |-----------------------------------------------|------------------|--------|-------------|--------------------------|
 * | HTTP 429                                      | upstream_error   | 500    | true        | rate_limited             |
 * | HTTP 5xx, 408, 409                            | upstream_error   | 500    | true        | http_status              |
 * | HTTP 401, 403 (credentials rejected)          | upstream_error   | 500    | false       | credentials_rejected     |
 * | other HTTP 4xx (400 context too long, 404...) | upstream_error   | 500    | false       | http_status              |
 * | no answer within the timeout                  | upstream_timeout | 500    | true        | timeout                  |
 * | connection refused / reset before a response  | upstream_error   | 500    | true        | connection               |
 * | connection cut mid-response                   | upstream_error   | 500    | true        | stream_cut               |
 * | stream ended without a finish                 | upstream_error   | 500    | true        | stream_incomplete        |
 * | error event inside a stream                   | upstream_error   | 500    | by its type | stream_error             |
 * | response that does not parse                  | upstream_error   | 500    | false       | malformed_response       |
 * | anything else the SDK throws                  | upstream_error   | 500    | false       | unknown                  |
 *
 * `details` always has `provider` and `reason`, plus `upstreamStatus` (the provider's HTTP status) where there was
 * one, and `upstreamType` / `upstreamCode` / `upstreamRequestId` when the provider named them. `retryAfterSeconds`
 * comes from `Retry-After` / `retry-after-ms` (429 and 5xx). The gateway can surface an upstream rate limit as its
 * own 429 by checking `details.upstreamStatus === 429` (and pass `retryAfterSeconds` on), or keep the 500.
 *
 * Nothing here repeats the SDK's error message: it can hold the provider's text, which may echo the prompt or
 * (OpenAI's 401) a masked API key. `cause` is a summary built from the fields above, safe to log.
 *
 * An aborted request is not a provider failure: it rejects with `createAbortError(signal)`, a DOMException named
 * `AbortError` whose `cause` is the signal's reason; recognise it with `isAbortError`.
 */
import { AppError } from '../errors.ts';

/** What went wrong upstream, independent of the SDK that reported it. */
export type UpstreamFailure =
  | {
      readonly kind: 'http';
      readonly status: number;
      readonly retryAfterSeconds?: number;
      readonly type?: string;
      readonly code?: string;
      readonly requestId?: string;
    }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'connection' }
  | { readonly kind: 'stream_cut' }
  | { readonly kind: 'stream_incomplete' }
  | { readonly kind: 'stream_error'; readonly type?: string }
  | { readonly kind: 'malformed_response' }
  | { readonly kind: 'unknown'; readonly errorName?: string };

/** Headers as the SDKs expose them (`Headers`, or anything with the same `get`). */
export interface HeaderReader {
  get(name: string): string | null;
}

// Upstream error types that say the request itself was wrong: sending it again would fail again.
const NON_RETRYABLE_STREAM_ERROR_TYPES: ReadonlySet<string> = new Set([
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'not_found_error',
  'billing_error',
  'request_too_large',
]);
// Identifiers (error types, codes, request ids) are copied only when they look like identifiers, never free text.
const IDENTIFIER_PATTERN = /^[A-Za-z0-9_.:-]{1,100}$/;

/** The AppError for a provider failure; its message names the provider and the failure, never upstream text. */
export function createUpstreamError(provider: string, failure: UpstreamFailure, timeoutMs?: number): AppError {
  const details: Record<string, unknown> = { provider, reason: failure.kind };
  switch (failure.kind) {
    case 'http':
      return createHttpError(provider, failure, details);
    case 'timeout':
      return new AppError(
        'upstream_timeout',
        timeoutMs === undefined
          ? `The LLM provider '${provider}' did not answer in time.`
          : `The LLM provider '${provider}' did not answer within ${timeoutMs} ms.`,
        { details, isRetryable: true, cause: summarize(provider, 'no answer within the timeout') },
      );
    case 'connection':
      return new AppError('upstream_error', `fhirgate could not connect to the LLM provider '${provider}'.`, {
        details,
        isRetryable: true,
        cause: summarize(provider, 'connection failed'),
      });
    case 'stream_cut':
      return new AppError(
        'upstream_error',
        `The connection to the LLM provider '${provider}' was cut before the reply was complete.`,
        { details, isRetryable: true, cause: summarize(provider, 'connection cut mid-response') },
      );
    case 'stream_incomplete':
      return new AppError('upstream_error', `The LLM provider '${provider}' ended the reply before finishing it.`, {
        details,
        isRetryable: true,
        cause: summarize(provider, 'stream ended without a finish reason'),
      });
    case 'stream_error': {
      const type = readIdentifier(failure.type);
      if (type !== undefined) {
        details.upstreamType = type;
      }
      return new AppError(
        'upstream_error',
        `The LLM provider '${provider}' reported an error during the reply${type ? ` (${type})` : ''}.`,
        {
          details,
          isRetryable: type === undefined || !NON_RETRYABLE_STREAM_ERROR_TYPES.has(type),
          cause: summarize(provider, `error event in the stream${type ? ` (${type})` : ''}`),
        },
      );
    }
    case 'malformed_response':
      return new AppError('upstream_error', `The LLM provider '${provider}' sent a response fhirgate could not read.`, {
        details,
        cause: summarize(provider, 'malformed response'),
      });
    case 'unknown': {
      const errorName = readIdentifier(failure.errorName);
      return new AppError('upstream_error', `The call to the LLM provider '${provider}' failed.`, {
        details,
        cause: summarize(provider, `unexpected failure${errorName ? ` (${errorName})` : ''}`),
      });
    }
  }
}

function createHttpError(
  provider: string,
  failure: Extract<UpstreamFailure, { kind: 'http' }>,
  details: Record<string, unknown>,
): AppError {
  const { status } = failure;
  details.upstreamStatus = status;
  const type = readIdentifier(failure.type);
  const code = readIdentifier(failure.code);
  const requestId = readIdentifier(failure.requestId);
  if (type !== undefined) {
    details.upstreamType = type;
  }
  if (code !== undefined) {
    details.upstreamCode = code;
  }
  if (requestId !== undefined) {
    details.upstreamRequestId = requestId;
  }
  const label = [type, code].filter((part) => part !== undefined).join('/');
  const cause = summarize(provider, `HTTP ${status}${label ? ` (${label})` : ''}${requestId ? `, request id ${requestId}` : ''}`);

  if (status === 401 || status === 403) {
    details.reason = 'credentials_rejected';
    return new AppError(
      'upstream_error',
      `The LLM provider '${provider}' rejected the credentials fhirgate used (HTTP ${status}).`,
      { details, cause },
    );
  }
  if (status === 429) {
    details.reason = 'rate_limited';
    return new AppError('upstream_error', `The LLM provider '${provider}' is rate limiting requests (HTTP 429).`, {
      details,
      isRetryable: true,
      retryAfterSeconds: failure.retryAfterSeconds,
      cause,
    });
  }
  details.reason = 'http_status';
  const isRetryable = status >= 500 || status === 408 || status === 409;
  return new AppError(
    'upstream_error',
    status >= 500
      ? `The LLM provider '${provider}' failed with HTTP ${status}.`
      : `The LLM provider '${provider}' refused the request with HTTP ${status}${code ? ` (${code})` : ''}.`,
    { details, isRetryable, retryAfterSeconds: isRetryable ? failure.retryAfterSeconds : undefined, cause },
  );
}

function summarize(provider: string, what: string): Error {
  const summary = new Error(`LLM provider '${provider}': ${what}`);
  summary.name = 'UpstreamFailure';
  return summary;
}

function readIdentifier(value: string | undefined): string | undefined {
  return value !== undefined && IDENTIFIER_PATTERN.test(value) ? value : undefined;
}

/**
 * Seconds to wait, from `retry-after-ms` (OpenAI's), or `Retry-After` in seconds or as an HTTP date;
 * undefined when absent or unreadable.
 */
export function readRetryAfterSeconds(headers: HeaderReader | undefined, now: number = Date.now()): number | undefined {
  const milliseconds = Number.parseFloat(headers?.get('retry-after-ms') ?? '');
  if (Number.isFinite(milliseconds) && milliseconds >= 0) {
    return milliseconds / 1000;
  }
  const value = headers?.get('retry-after')?.trim();
  if (!value) {
    return undefined;
  }
  if (/^\d+(\.\d+)?$/.test(value)) {
    return Number.parseFloat(value);
  }
  // An HTTP date names its weekday and month; without letters, Date.parse would read "-3" as a year.
  if (!/[A-Za-z]/.test(value)) {
    return undefined;
  }
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/**
 * Recognises the transport failures every SDK lets through untyped (undici's errors come from Node's realm, so
 * they are compared by name and message, not with instanceof): a body cut mid-way, a refused connection, a
 * response body that is not JSON.
 */
export function describeTransportFailure(error: unknown): UpstreamFailure | undefined {
  if (!isErrorLike(error)) {
    return undefined;
  }
  if (error.name === 'SyntaxError') {
    return { kind: 'malformed_response' };
  }
  if (error.name === 'TimeoutError') {
    return { kind: 'timeout' };
  }
  if (error.name === 'TypeError' && error.message === 'terminated') {
    return { kind: 'stream_cut' };
  }
  if (error.name === 'TypeError' && error.message === 'fetch failed') {
    return { kind: 'connection' };
  }
  const code = 'code' in error ? error.code : undefined;
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return { kind: 'connection' };
  }
  return undefined;
}

/** The error an aborted request rejects with: a DOMException named `AbortError`, caused by the signal's reason. */
export function createAbortError(signal: AbortSignal): DOMException {
  return new DOMException('The LLM request was aborted.', { name: 'AbortError', cause: signal.reason });
}

/** True for the error an aborted `complete` or `stream` rejects with (and for any other AbortError). */
export function isAbortError(error: unknown): boolean {
  return isErrorLike(error) && error.name === 'AbortError';
}

function isErrorLike(value: unknown): value is { name: string; message: string } & object {
  return (
    typeof value === 'object' &&
    value !== null &&
    'name' in value &&
    typeof value.name === 'string' &&
    'message' in value &&
    typeof value.message === 'string'
  );
}
