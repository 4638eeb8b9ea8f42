/**
 * The `/graphql` surface's error shape: GraphQL errors with `extensions.code`, as the house style asks of this
 * surface. An AppError is rendered here, its message only (AppError messages are safe for the caller); an
 * unknown failure becomes `internal_error` through `toAppError`, so internal text never reaches the client.
 */
import type { Response } from 'express';
import { toAppError, type AppError, type AppErrorCode } from '../errors.ts';
import { allowHeaderOf } from '../http/method-not-allowed.ts';
import { annotateRequest } from '../telemetry/request-telemetry.ts';

/** The `extensions.code` values fhirgate's `/graphql` answers with. */
export type GraphqlErrorCode =
  | 'BAD_REQUEST'
  | 'GRAPHQL_PARSE_FAILED'
  | 'GRAPHQL_VALIDATION_FAILED'
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'RATE_LIMITED'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL_SERVER_ERROR';

/** One error of a GraphQL response. */
export interface GraphqlResponseError {
  readonly message: string;
  readonly locations?: readonly { readonly line: number; readonly column: number }[];
  readonly path?: readonly (string | number)[];
  readonly extensions: { readonly code: GraphqlErrorCode };
}

/** A GraphQL response body (the ExecutionResult, as plain JSON). */
export interface GraphqlResponse {
  readonly data?: Record<string, unknown> | null;
  readonly errors?: readonly GraphqlResponseError[];
}

const CODE_BY_APP_ERROR: Partial<Record<AppErrorCode, GraphqlErrorCode>> = {
  invalid_request: 'BAD_REQUEST',
  payload_too_large: 'BAD_REQUEST',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  not_found: 'NOT_FOUND',
  method_not_allowed: 'METHOD_NOT_ALLOWED',
  conversation_not_found: 'NOT_FOUND',
  conversation_not_owned: 'FORBIDDEN',
  model_not_found: 'NOT_FOUND',
  rate_limited: 'RATE_LIMITED',
  not_configured: 'SERVICE_UNAVAILABLE',
  unavailable: 'SERVICE_UNAVAILABLE',
};

const REQUEST_ERROR_CODES: ReadonlySet<string> = new Set(['GRAPHQL_PARSE_FAILED', 'GRAPHQL_VALIDATION_FAILED']);

/** The `extensions.code` for an error: an `invalid_request` may name a finer GraphQL code in `details.graphqlCode`. */
export function graphqlCodeOf(error: unknown): GraphqlErrorCode {
  const appError = toAppError(error);
  const finer = appError.details?.graphqlCode;
  if (appError.code === 'invalid_request' && typeof finer === 'string' && REQUEST_ERROR_CODES.has(finer)) {
    return finer as GraphqlErrorCode;
  }
  return CODE_BY_APP_ERROR[appError.code] ?? 'INTERNAL_SERVER_ERROR';
}

/**
 * Sends a failure as a GraphQL response with its status, and `Retry-After` where the error names one; its code goes
 * on the request's log line.
 */
export function sendGraphqlError(response: Response, error: AppError): void {
  annotateRequest(response, { code: error.code });
  if (error.retryAfterSeconds !== undefined) {
    response.setHeader('Retry-After', String(error.retryAfterSeconds));
  }
  const allow = allowHeaderOf(error);
  if (allow) {
    response.setHeader('Allow', allow);
  }
  response.status(error.status).json(renderGraphqlError(error));
}

/** Renders any failure as a GraphQL response with one error; the HTTP status is `toAppError(error).status`. */
export function renderGraphqlError(error: unknown): GraphqlResponse {
  return { errors: [{ message: toAppError(error).message, extensions: { code: graphqlCodeOf(error) } }] };
}
