/**
 * The standalone host's own routes (`/fhir/R4`, `/auth`, `/admin`, and any path nobody serves) answer errors as
 * Medplum's do: an OperationOutcome with its status. A Medplum refusal keeps its outcome; an AppError (a body too
 * large, too deep or not JSON, a refusal of the unauthenticated-request bound) becomes the matching outcome;
 * anything else is a 500 without its text. Nothing here logs or echoes a request body.
 */
import { badRequest, contentTooLarge, forbidden, getStatus, notFound, tooManyRequests, unauthorized } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { AppError, toAppError } from '../../errors.ts';
import type { HostLogger } from '../../host.ts';
import { fromBodyParserError } from '../../http/json-body.ts';
import { outcomeOf } from '../../medplum-errors.ts';

const FHIR_JSON = 'application/fhir+json';

const SERVER_ERROR: OperationOutcome = {
  resourceType: 'OperationOutcome',
  issue: [{ severity: 'error', code: 'exception', details: { text: 'Internal server error' } }],
};

/** The OperationOutcome an AppError is answered with. */
export function toOperationOutcome(error: AppError): OperationOutcome {
  switch (error.code) {
    case 'unauthenticated':
      return unauthorized;
    case 'forbidden':
      return forbidden;
    case 'not_found':
      return notFound;
    case 'payload_too_large':
      return contentTooLarge(error.message);
    case 'rate_limited':
      return { ...tooManyRequests, issue: [{ severity: 'error', code: 'throttled', details: { text: error.message } }] };
    case 'unavailable':
      // Medplum has no outcome for a 503: a transient issue, sent with the table's status (outcomeForThrown).
      return { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'transient', details: { text: error.message } }] };
    default:
      return error.status < 500 ? badRequest(error.message) : SERVER_ERROR;
  }
}

/** Sends an outcome with its status (and `Retry-After` when `retryAfterSeconds` is given). */
export function sendOutcome(response: Response, outcome: OperationOutcome, retryAfterSeconds?: number, status = getStatus(outcome)): void {
  if (retryAfterSeconds !== undefined) {
    response.setHeader('Retry-After', String(Math.ceil(retryAfterSeconds)));
  }
  response.status(status).type(FHIR_JSON).send(JSON.stringify(outcome));
}

/**
 * What a thrown value is answered with, as an outcome and a status, and the AppError it was read as (for logging).
 * A Medplum outcome keeps its own status; an AppError's server-side failure takes the table's (503 for
 * `unavailable`), its client errors the status of the outcome they map to.
 */
export function outcomeForThrown(thrown: unknown): { readonly outcome: OperationOutcome; readonly status: number; readonly error: AppError } {
  const medplumOutcome = outcomeOf(thrown);
  const error = toAppError(fromBodyParserError(thrown) ?? fromExpressError(thrown) ?? thrown);
  if (medplumOutcome) {
    return { outcome: medplumOutcome, status: getStatus(medplumOutcome), error };
  }
  const outcome = toOperationOutcome(error);
  return { outcome, status: error.status >= 500 ? error.status : getStatus(outcome), error };
}

/**
 * Error handler for the host's OperationOutcome routes, and the app's last one: whatever reaches it leaves as an
 * outcome, never as Express's default HTML page, which prints the error (and a body parser's error holds the
 * body) to stderr. A failure after the answer began closes the connection.
 */
export function createOutcomeErrorHandler(logger: HostLogger | undefined): ErrorRequestHandler {
  return (thrown: unknown, _request, response, _next) => {
    const { outcome, status, error } = outcomeForThrown(thrown);
    if (status >= 500) {
      // The name only: a message can quote what the client sent.
      logger?.error('Request failed', { code: error.code, cause: nameOf(error.cause ?? thrown) });
    }
    if (response.headersSent) {
      response.destroy();
      return;
    }
    sendOutcome(response, outcome, error.retryAfterSeconds, status);
  };
}

/** The app's last handler for paths and methods nobody serves: Medplum's 404 outcome. */
export function answerNotFound(): RequestHandler {
  return (_request, response) => sendOutcome(response, notFound);
}

/** Express's router marks its own client errors (a URL that does not decode) with a 4xx `status`. */
function fromExpressError(thrown: unknown): AppError | undefined {
  const status = typeof thrown === 'object' && thrown !== null && 'status' in thrown ? (thrown as { status: unknown }).status : undefined;
  return typeof status === 'number' && status >= 400 && status < 500 && !AppError.isInstance(thrown) && !outcomeOf(thrown)
    ? new AppError('invalid_request', 'The request could not be read.')
    : undefined;
}

function nameOf(value: unknown): string | undefined {
  return value instanceof Error ? value.name : undefined;
}
