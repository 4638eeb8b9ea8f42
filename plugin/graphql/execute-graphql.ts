/**
 * Runs a request (already in Medplum's dialect) on Medplum's GraphQL engine, the same `$graphql` operation
 * `FhirRouter` serves on `/fhir/R4`, over the caller's repository, so every read and write is checked by the
 * caller's AccessPolicy. With a fast path, a document Medplum's handler has already validated runs on a schema
 * pruned to what it needs, without being validated again (`fast-graphql-path.ts`). Whatever goes wrong comes
 * back as GraphQL errors with `extensions.code`: a refused write is FORBIDDEN, never a thrown 500, and server
 * faults never repeat their internal text.
 */
import { getStatus, isOk } from '@medplum/core';
import { makeSimpleRequest, type FhirRepository, type FhirRouter } from '@medplum/fhir-router';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { FastGraphqlPath, type GraphqlEngineResponse } from './fast-graphql-path.ts';
import { isJsonObject } from './graphql-request.ts';
import { renderGraphqlError, type GraphqlErrorCode, type GraphqlResponse, type GraphqlResponseError } from './graphql-response.ts';
import { outcomeOf } from '../medplum-errors.ts';

/** What the engine needs: a document in Medplum's dialect, the operation to run and the variables. */
export interface GraphqlExecutionRequest {
  readonly query: string;
  readonly operationName?: string;
  readonly variables?: Readonly<Record<string, unknown>>;
}

const INTERNAL_MESSAGE = 'The server could not complete the request.';
const MAX_MESSAGE_CHARS = 500;

/** Executes the request on Medplum's engine with the given repository; always resolves to a GraphQL response. */
export async function executeGraphql(
  router: FhirRouter,
  repo: FhirRepository,
  request: GraphqlExecutionRequest,
  fastPath?: FastGraphqlPath,
): Promise<GraphqlResponse> {
  const { query, operationName, variables } = request;
  let response: GraphqlEngineResponse;
  try {
    response = fastPath
      ? await fastPath.execute(repo, request)
      : await router.handleRequest(makeSimpleRequest('POST', '$graphql', { query, operationName, variables }), repo);
  } catch (error) {
    return renderGraphqlError(error);
  }
  const [outcome, result] = response;
  if (!isOk(outcome) || !isJsonObject(result)) {
    return { errors: outcomeErrors(outcome) };
  }
  const data = result.data;
  const errors = Array.isArray(result.errors) ? result.errors.map((error) => executionError(error, 'data' in result)) : undefined;
  return {
    ...('data' in result ? { data: isJsonObject(data) ? data : null } : {}),
    ...(errors && errors.length > 0 ? { errors } : {}),
  };
}

/**
 * The engine refused the request before running it: 400 is a syntax or validation error (Medplum's messages,
 * which name the offending field or type), 403 a refused introspection; anything else is reported by status.
 */
function outcomeErrors(outcome: OperationOutcome): GraphqlResponseError[] {
  const status = getStatus(outcome);
  const texts = (outcome.issue ?? []).map((issue) => issue.details?.text).filter((text): text is string => Boolean(text));
  if (status !== 400) {
    return [{ message: messageFor(outcome), extensions: { code: codeForStatus(status) } }];
  }
  return (texts.length > 0 ? texts : ['Invalid GraphQL request.']).map((text) => ({
    message: truncate(text),
    extensions: { code: requestErrorCode(text) },
  }));
}

/** One error of an execution: a resolver's OperationOutcome keeps its status; other faults are internal. */
function executionError(error: unknown, executed: boolean): GraphqlResponseError {
  const fields = isJsonObject(error) ? error : {};
  const position = {
    ...(Array.isArray(fields.locations) ? { locations: fields.locations.filter(isLocation) } : {}),
    ...(Array.isArray(fields.path) ? { path: fields.path.filter(isPathSegment) } : {}),
  };
  const cause = error instanceof Error ? (error as Error & { originalError?: unknown }).originalError : undefined;
  const outcome = outcomeOf(cause);
  if (outcome) {
    return { message: messageFor(outcome), ...position, extensions: { code: codeForStatus(getStatus(outcome)) } };
  }
  if (!executed) {
    // No data at all: graphql refused the request itself (e.g. a variable of the wrong type); its message is for the caller.
    const message = typeof fields.message === 'string' ? truncate(fields.message) : 'Invalid GraphQL request.';
    return { message, ...position, extensions: { code: 'BAD_REQUEST' } };
  }
  // A resolver that crashed, or an engine fault such as a null in a non-null field: no internal text.
  return { message: INTERNAL_MESSAGE, ...position, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
}

function codeForStatus(status: number): GraphqlErrorCode {
  if (status === 401) {
    return 'UNAUTHENTICATED';
  }
  if (status === 403) {
    return 'FORBIDDEN';
  }
  if (status === 404 || status === 410) {
    return 'NOT_FOUND';
  }
  if (status === 429) {
    return 'RATE_LIMITED';
  }
  return status >= 400 && status < 500 ? 'BAD_REQUEST' : 'INTERNAL_SERVER_ERROR';
}

function requestErrorCode(text: string): GraphqlErrorCode {
  if (text === 'GraphQL syntax error.') {
    return 'GRAPHQL_PARSE_FAILED';
  }
  return text === 'Must provide query.' ? 'BAD_REQUEST' : 'GRAPHQL_VALIDATION_FAILED';
}

/** A client error's own text (Medplum writes it for clients); a server fault's never. */
function messageFor(outcome: OperationOutcome): string {
  if (getStatus(outcome) >= 500) {
    return INTERNAL_MESSAGE;
  }
  const texts = (outcome.issue ?? []).map((issue) => issue.details?.text).filter(Boolean);
  return texts.length > 0 ? truncate(texts.join('; ')) : 'The request was refused.';
}

function isLocation(value: unknown): value is { line: number; column: number } {
  return isJsonObject(value) && typeof value.line === 'number' && typeof value.column === 'number';
}

function isPathSegment(value: unknown): value is string | number {
  return typeof value === 'string' || typeof value === 'number';
}

function truncate(text: string): string {
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text;
}

/**
 * Builds Medplum's whole GraphQL schema now rather than on the first request that needs it (it takes seconds, once
 * per process, and blocks the event loop meanwhile), and checks the fast path can read it. The standalone host
 * calls it at start-up, before it takes traffic, with FHIRGATE_GRAPHQL_WARMUP=on.
 */
export async function warmUpGraphqlSchema(router: FhirRouter, repo: FhirRepository): Promise<void> {
  await executeGraphql(router, repo, { query: '{ __typename }' });
  await new FastGraphqlPath(router).prepare();
}
