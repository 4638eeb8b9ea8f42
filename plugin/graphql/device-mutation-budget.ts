/**
 * What a device's document costs of its rate limit: one unit per mutation field of the operation that runs
 * (aliases, inline fragments and repeats each count), so that `rate_limit_per_second` bounds the writes a device
 * makes, not only its requests: 50 aliased `ObservationCreate`s in one document are 50 units, not 1. The request
 * itself took one unit when its token was checked; the document's other mutations take theirs here, all at once,
 * before any of them runs: a document that does not fit what is left of the second is refused whole (429), and
 * nothing of it is written. A document with more mutations than the device may make in a second could never run,
 * so it is refused outright, without spending anything.
 */
import { OperationTypeNode } from 'graphql';
import { AppError } from '../errors.ts';
import { selectOperation } from './document-limits.ts';
import type { MedplumGraphqlRequest } from './graphql-request.ts';
import { collectRootFields, fragmentsOf } from './mutation-fields.ts';

/** The mutation fields of the operation `request` runs (0 for a query). */
export function countMutationFields(request: Pick<MedplumGraphqlRequest, 'document' | 'operationName'>): number {
  const operation = selectOperation(request.document, request.operationName);
  if (operation.operation !== OperationTypeNode.MUTATION) {
    return 0;
  }
  return collectRootFields(operation, fragmentsOf(request.document)).filter(({ field }) => field.name.value !== '__typename').length;
}

/**
 * Units of the device's budget the document takes beyond its request's own; throws `invalid_request` when it holds
 * more mutations than `perSecond`, the most a device may make in a second.
 */
export function extraMutationUnits(request: Pick<MedplumGraphqlRequest, 'document' | 'operationName'>, perSecond: number): number {
  const mutations = countMutationFields(request);
  if (mutations > perSecond) {
    throw new AppError(
      'invalid_request',
      `The GraphQL operation holds ${mutations} mutations; a device may make at most ${perSecond} a second (its rate limit, each mutation counting as one request), so send them in several documents.`,
      { details: { graphqlCode: 'GRAPHQL_VALIDATION_FAILED' } },
    );
  }
  return Math.max(0, mutations - 1);
}
