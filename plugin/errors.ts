/**
 * The one error type of fhirgate. Every failure the plugin reports carries an `AppErrorCode`; each surface
 * (`/v1`, the device token route, `/graphql`, `/fhir`) renders it in its own standard shape, using the one
 * status table below.
 */
import { OperationOutcomeError, getStatus } from '@medplum/core';

/** What went wrong, independent of the surface that reports it. */
export type AppErrorCode =
  | 'invalid_request'
  | 'unauthenticated'
  | 'forbidden'
  | 'not_found'
  | 'conversation_not_found'
  | 'conflict'
  | 'payload_too_large'
  | 'rate_limited'
  | 'upstream_error'
  | 'upstream_timeout'
  | 'not_configured'
  | 'unavailable'
  | 'internal_error';

/** HTTP status for each error code: the one table every surface uses. */
export const HTTP_STATUS_BY_CODE: Readonly<Record<AppErrorCode, number>> = {
  invalid_request: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conversation_not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  upstream_error: 502,
  upstream_timeout: 504,
  not_configured: 503,
  unavailable: 503,
  internal_error: 500,
};

/** Options of an AppError beyond its code and message. */
export interface AppErrorOptions {
  /** Structured, non-secret details for the client (e.g. the offending field). */
  readonly details?: Record<string, unknown>;
  readonly cause?: unknown;
  readonly isRetryable?: boolean;
  /** Seconds the client should wait before retrying (rate limits, upstream back-off). */
  readonly retryAfterSeconds?: number;
}

const APP_ERROR_MARKER = Symbol.for('fhirgate.AppError');

/** A failure with a code from `AppErrorCode`; the message is safe to show to the caller. */
export class AppError extends Error {
  readonly code: AppErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly isRetryable: boolean;
  readonly retryAfterSeconds: number | undefined;
  readonly [APP_ERROR_MARKER] = true;

  constructor(code: AppErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details;
    this.isRetryable = options.isRetryable ?? false;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** The HTTP status this error is rendered with. */
  get status(): number {
    return HTTP_STATUS_BY_CODE[this.code];
  }

  /** True for any AppError, also one created by another copy of this module. */
  static isInstance(value: unknown): value is AppError {
    return typeof value === 'object' && value !== null && APP_ERROR_MARKER in value;
  }
}

/** Wraps anything thrown into an AppError; unknown failures become `internal_error` without leaking their text. */
export function toAppError(error: unknown): AppError {
  if (AppError.isInstance(error)) {
    return error;
  }
  // The host's repository refuses with Medplum's OperationOutcomes: a policy denial stays a 403, a hidden or
  // missing resource a 404. Other outcomes (a resource fhirgate built that the store rejects) are server faults.
  if (error instanceof OperationOutcomeError) {
    const status = getStatus(error.outcome);
    if (status === 403) {
      return new AppError('forbidden', 'Forbidden: the AccessPolicy of the caller does not allow this.', { cause: error });
    }
    if (status === 404) {
      return new AppError('not_found', 'Not found.', { cause: error });
    }
  }
  return new AppError('internal_error', 'The server could not complete the request.', { cause: error });
}
