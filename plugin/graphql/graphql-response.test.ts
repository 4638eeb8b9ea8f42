import { describe, expect, test } from '@jest/globals';
import { OperationOutcomeError, forbidden } from '@medplum/core';
import { AppError } from '../errors.ts';
import { renderGraphqlError } from './graphql-response.ts';

describe('renderGraphqlError', () => {
  test('maps each AppError code to its extensions.code, with the AppError message', () => {
    const cases: [AppError, string][] = [
      [new AppError('invalid_request', 'Bad body.'), 'BAD_REQUEST'],
      [new AppError('invalid_request', 'Syntax.', { details: { graphqlCode: 'GRAPHQL_PARSE_FAILED' } }), 'GRAPHQL_PARSE_FAILED'],
      [new AppError('invalid_request', 'Too deep.', { details: { graphqlCode: 'GRAPHQL_VALIDATION_FAILED' } }), 'GRAPHQL_VALIDATION_FAILED'],
      [new AppError('invalid_request', 'Odd.', { details: { graphqlCode: 'SOMETHING_ELSE' } }), 'BAD_REQUEST'],
      [new AppError('unauthenticated', 'No token.'), 'UNAUTHENTICATED'],
      [new AppError('forbidden', 'Not yours.'), 'FORBIDDEN'],
      [new AppError('not_found', 'Gone.'), 'NOT_FOUND'],
      [new AppError('rate_limited', 'Slow down.'), 'RATE_LIMITED'],
      [new AppError('unavailable', 'Shutting down.'), 'SERVICE_UNAVAILABLE'],
      [new AppError('not_configured', 'No device_auth.'), 'SERVICE_UNAVAILABLE'],
      [new AppError('upstream_error', 'Upstream.'), 'INTERNAL_SERVER_ERROR'],
      [new AppError('internal_error', 'Oops.'), 'INTERNAL_SERVER_ERROR'],
    ];
    for (const [error, code] of cases) {
      expect(renderGraphqlError(error)).toEqual({ errors: [{ message: error.message, extensions: { code } }] });
    }
  });

  test('an unknown failure does not repeat its text; an OperationOutcome keeps its status', () => {
    expect(renderGraphqlError(new Error('secret at db:5432'))).toEqual({
      errors: [{ message: 'The server could not complete the request.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }],
    });
    expect(renderGraphqlError(new OperationOutcomeError(forbidden)).errors?.[0].extensions.code).toBe('FORBIDDEN');
  });
});
