/**
 * The one error type of fhirgate. Every failure the plugin reports carries an `AppErrorCode`; each surface
 * (`/v1`, the device token route, `/graphql`, `/fhir`) renders it in its own standard shape, using the one
 * status table below.
 */
import { getStatus } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { outcomeOf, quotaRetryAfterSeconds } from './medplum-errors.ts';

/** What went wrong, independent of the surface that reports it. */
export type AppErrorCode =
  | 'invalid_request'
  | 'unauthenticated'
  | 'forbidden'
  | 'patient_data_not_allowed'
  | 'not_found'
  | 'method_not_allowed'
  | 'conversation_not_found'
  | 'conversation_not_owned'
  | 'model_not_found'
  | 'conflict'
  | 'gone'
  | 'precondition_failed'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'unprocessable'
  | 'rate_limited'
  | 'model_not_allowed'
  | 'budget_exceeded_project_day'
  | 'budget_exceeded_project_month'
  | 'budget_exceeded_user_day'
  | 'budget_exceeded_user_month'
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
  // Governance (plugin/governance/): a turn about a patient on a model not cleared for patient data.
  patient_data_not_allowed: 403,
  not_found: 404,
  method_not_allowed: 405,
  conversation_not_found: 404,
  // A conversation another user started, in a project that does not share conversations (chat/conversation-ownership.ts).
  conversation_not_owned: 403,
  model_not_found: 404,
  conflict: 409,
  gone: 410,
  precondition_failed: 412,
  payload_too_large: 413,
  // A body the route cannot read as what it takes (the MCP endpoint's JSON-RPC is application/json only).
  unsupported_media_type: 415,
  unprocessable: 422,
  rate_limited: 429,
  // Governance (plugin/governance/): a model the caller was not granted; a token or cost budget used up.
  model_not_allowed: 403,
  budget_exceeded_project_day: 429,
  budget_exceeded_project_month: 429,
  budget_exceeded_user_day: 429,
  budget_exceeded_user_month: 429,
  // The spec's table: an LLM provider error is a 500; the code tells a failure from a timeout.
  upstream_error: 500,
  upstream_timeout: 500,
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

/**
 * The same failure, told to the client as final (`isRetryable` false; its `Retry-After` kept as information): for a
 * turn that is over, whose provider call fhirgate already retried as far as its settings allow, so that a client's
 * own retries (the openai SDKs honour `x-should-retry: false`) do not start it again.
 */
export function finalError(error: AppError): AppError {
  if (!error.isRetryable) {
    return error;
  }
  return new AppError(error.code, error.message, { details: error.details, cause: error.cause, retryAfterSeconds: error.retryAfterSeconds });
}

/** True when `code` is one of fhirgate's error codes (e.g. one read back from a record). */
export function isAppErrorCode(code: unknown): code is AppErrorCode {
  return typeof code === 'string' && Object.hasOwn(HTTP_STATUS_BY_CODE, code);
}

/** Wraps anything thrown into an AppError; unknown failures become `internal_error` without leaking their text. */
export function toAppError(error: unknown): AppError {
  if (AppError.isInstance(error)) {
    return error;
  }
  const outcome = outcomeOf(error);
  return (outcome && fromMedplumOutcome(outcome, error)) ?? new AppError('internal_error', 'The server could not complete the request.', { cause: error });
}

/**
 * The host's repository (and Medplum's FHIR quota) refuse with OperationOutcomes: each 4xx keeps its status, in
 * words that name the FHIR server's refusal without repeating its diagnostics (they may quote the resource). A
 * 5xx is the server's fault: undefined, so it becomes `internal_error`.
 */
function fromMedplumOutcome(outcome: OperationOutcome, cause: unknown): AppError | undefined {
  const status = getStatus(outcome);
  const factory = OUTCOME_ERRORS[status];
  if (factory) {
    return factory(outcome, cause);
  }
  return status >= 400 && status < 500 ? new AppError('invalid_request', `The FHIR server refused the request (${status}).`, { cause }) : undefined;
}

const OUTCOME_ERRORS: Readonly<Record<number, (outcome: OperationOutcome, cause: unknown) => AppError>> = {
  400: (_outcome, cause) => new AppError('invalid_request', 'The FHIR server refused the request as invalid.', { cause }),
  401: (_outcome, cause) => new AppError('unauthenticated', 'The FHIR server did not accept the credentials.', { cause }),
  403: (_outcome, cause) => new AppError('forbidden', 'Forbidden: the AccessPolicy of the caller does not allow this.', { cause }),
  404: (_outcome, cause) => new AppError('not_found', 'Not found.', { cause }),
  409: (_outcome, cause) => new AppError('conflict', 'The FHIR server refused the write: it conflicts with what is stored.', { cause }),
  410: (_outcome, cause) => new AppError('gone', 'The record was deleted.', { cause }),
  412: (_outcome, cause) => new AppError('precondition_failed', 'The FHIR server refused the write: a precondition failed.', { cause }),
  413: (_outcome, cause) => new AppError('payload_too_large', 'The FHIR server refused the write: it is too large.', { cause }),
  422: (_outcome, cause) => new AppError('unprocessable', 'The FHIR server could not process the request.', { cause }),
  429: (outcome, cause) => {
    const retryAfterSeconds = quotaRetryAfterSeconds(outcome);
    return new AppError('rate_limited', `The FHIR server's request quota for this user or project is used up; retry in ${retryAfterSeconds} s.`, {
      cause,
      isRetryable: true,
      retryAfterSeconds,
      details: { limit: 'fhir_quota' },
    });
  },
};
