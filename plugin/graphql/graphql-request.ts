/**
 * The body of a `POST /graphql` request, checked once at the edge so the translation and the device guard work on
 * a known shape. One document per request: an array body (a batch) is refused here, with a message that says so,
 * because fhirgate's limits and the device guard are defined per document.
 */
import type { DocumentNode } from 'graphql';
import { AppError } from '../errors.ts';

/** A GraphQL request as a client sends it (the GraphQL-over-HTTP `{query, operationName, variables}`). */
export interface GraphqlRequest {
  readonly query: string;
  readonly operationName?: string;
  readonly variables?: Readonly<Record<string, unknown>>;
}

/** A request in Medplum's dialect, ready for Medplum's engine; `document` is always the parse of `query`. */
export interface MedplumGraphqlRequest {
  readonly query: string;
  readonly operationName?: string;
  readonly variables: Readonly<Record<string, unknown>>;
  readonly document: DocumentNode;
}

/** Checks the shape of a parsed JSON body; anything else is an `invalid_request`. */
export function parseGraphqlRequestBody(body: unknown): GraphqlRequest {
  if (Array.isArray(body)) {
    throw new AppError('invalid_request', 'Batched GraphQL requests are not supported: send one request object per call.');
  }
  if (typeof body !== 'object' || body === null) {
    throw new AppError('invalid_request', 'The request body must be a JSON object with a "query" string.');
  }
  const { query, operationName, variables } = body as Record<string, unknown>;
  if (typeof query !== 'string' || query.trim() === '') {
    throw new AppError('invalid_request', 'The request body must have a non-empty "query" string.', { details: { param: 'query' } });
  }
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') {
    throw new AppError('invalid_request', '"operationName" must be a string.', { details: { param: 'operationName' } });
  }
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables))) {
    throw new AppError('invalid_request', '"variables" must be a JSON object.', { details: { param: 'variables' } });
  }
  return {
    query,
    ...(typeof operationName === 'string' ? { operationName } : {}),
    ...(variables ? { variables: variables as Record<string, unknown> } : {}),
  };
}

/** The value of a variable, read as an own property only (`__proto__` is a valid GraphQL variable name). */
export function variableValue(variables: Readonly<Record<string, unknown>>, name: string): unknown {
  return Object.hasOwn(variables, name) ? variables[name] : undefined;
}

/** A copy of the variables with one value set, safely for any name. */
export function withVariable(variables: Readonly<Record<string, unknown>>, name: string, value: unknown): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...variables };
  Object.defineProperty(copy, name, { value, enumerable: true, writable: true, configurable: true });
  return copy;
}

/** True for a JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
