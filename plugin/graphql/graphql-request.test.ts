import { describe, expect, test } from '@jest/globals';
import { AppError } from '../errors.ts';
import { parseGraphqlRequestBody, variableValue, withVariable } from './graphql-request.ts';

function messageOf(body: unknown): string {
  try {
    parseGraphqlRequestBody(body);
  } catch (error) {
    if (AppError.isInstance(error) && error.code === 'invalid_request') {
      return error.message;
    }
    throw error;
  }
  throw new Error('expected an invalid_request');
}

describe('parseGraphqlRequestBody', () => {
  test('accepts a query with an optional operation name and variables', () => {
    expect(parseGraphqlRequestBody({ query: '{ PatientList { id } }', operationName: null, variables: null })).toEqual({ query: '{ PatientList { id } }' });
    expect(parseGraphqlRequestBody({ query: 'query A { PatientList { id } }', operationName: 'A', variables: { x: 1 } })).toEqual({
      query: 'query A { PatientList { id } }',
      operationName: 'A',
      variables: { x: 1 },
    });
  });

  test('refuses batches and malformed bodies clearly', () => {
    expect(messageOf([{ query: '{ a }' }])).toMatch(/Batched GraphQL requests are not supported/);
    expect(messageOf('query')).toMatch(/JSON object/);
    expect(messageOf({ query: '  ' })).toMatch(/non-empty "query"/);
    expect(messageOf({ query: '{ a }', operationName: 3 })).toMatch(/operationName/);
    expect(messageOf({ query: '{ a }', variables: [1] })).toMatch(/variables/);
  });
});

describe('variables', () => {
  test('__proto__ is an ordinary variable name', () => {
    const variables = withVariable({}, '__proto__', { polluted: true });
    expect(variableValue(variables, '__proto__')).toEqual({ polluted: true });
    expect(Object.getPrototypeOf(variables)).toBe(Object.prototype);
    expect(variableValue({}, 'toString')).toBeUndefined();
  });
});
