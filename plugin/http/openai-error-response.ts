import type { NextFunction, Request, Response } from 'express';
import { AppError, toAppError } from '../errors.ts';
import type { HostLogger } from '../host.ts';
import { annotateRequest, requestIdOf } from '../telemetry/request-telemetry.ts';
import { fromBodyParserError } from './json-body.ts';
import { allowHeaderOf } from './method-not-allowed.ts';

/** The spec's error body: `{error: {message, type, code, param}}`, as OpenAI clients expect it; `param` null when no one field is at fault. */
export interface OpenAiErrorBody {
  readonly error: { readonly message: string; readonly type: string; readonly code: string; readonly param: string | null };
}

const ERROR_TYPE_BY_STATUS: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'invalid_request_error',
  405: 'invalid_request_error',
  409: 'invalid_request_error',
  410: 'invalid_request_error',
  412: 'invalid_request_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  422: 'invalid_request_error',
  429: 'rate_limit_error',
};

/** Codes whose type is not their status's: a refusal of what the request asks for, not of who asks. */
const ERROR_TYPE_BY_CODE: Readonly<Partial<Record<AppError['code'], string>>> = {
  patient_data_not_allowed: 'invalid_request_error',
};

/** Renders an AppError in the spec's error body. */
export function toOpenAiErrorBody(error: AppError): OpenAiErrorBody {
  const param = typeof error.details?.param === 'string' && error.details.param ? error.details.param : null;
  return {
    error: {
      message: error.message,
      type: ERROR_TYPE_BY_CODE[error.code] ?? ERROR_TYPE_BY_STATUS[error.status] ?? 'api_error',
      code: error.code,
      param,
    },
  };
}

/**
 * Sends an error as an HTTP response in the spec's shape, with `Retry-After` where the error names one, and
 * `x-should-retry`, the header OpenAI's SDKs obey before their own retries (which otherwise retry every 408, 409,
 * 429 and 5xx): `true` only for a refusal a retry may pass, with nothing stored (shutting down, a store not taking
 * the prompt, a caller's limit, a turn still running under the same Idempotency-Key); `false` for everything else,
 * a budget used up until its period resets and a turn whose provider failed after fhirgate's own retries included
 * (sent again, it would be a new turn: a new conversation and more provider calls). The error's code goes on the
 * request's log line.
 */
export function sendOpenAiError(response: Response, error: AppError): void {
  annotateRequest(response, { code: error.code });
  if (error.retryAfterSeconds !== undefined) {
    response.setHeader('Retry-After', String(Math.ceil(error.retryAfterSeconds)));
  }
  response.setHeader('x-should-retry', error.isRetryable ? 'true' : 'false');
  const allow = allowHeaderOf(error);
  if (allow) {
    response.setHeader('Allow', allow);
  }
  response.status(error.status).json(toOpenAiErrorBody(error));
}

/** Express error handler for the spec's JSON routes: every failure leaves in the spec's error body. */
export function createOpenAiErrorHandler(logger: HostLogger | undefined) {
  return (thrown: unknown, _request: Request, response: Response, next: NextFunction): void => {
    const error = toAppError(fromBodyParserError(thrown) ?? thrown);
    if (error.status >= 500 && error.code !== 'unavailable') {
      logger?.error('Request failed', { requestId: requestIdOf(response), code: error.code, cause: describeCause(error.cause) });
    }
    if (response.headersSent) {
      next(thrown);
      return;
    }
    sendOpenAiError(response, error);
  };
}

function describeCause(cause: unknown): string | undefined {
  return cause instanceof Error ? `${cause.name}: ${cause.message}` : undefined;
}
