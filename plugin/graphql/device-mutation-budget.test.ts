import { describe, expect, test } from '@jest/globals';
import { parse } from 'graphql';
import { appErrorOf } from '../../test/support/app-error.ts';
import { countMutationFields, extraMutationUnits } from './device-mutation-budget.ts';

function request(query: string, operationName?: string) {
  return { document: parse(query), ...(operationName ? { operationName } : {}) };
}

const CREATE = 'ObservationCreate(res: $input) { id }';

function aliasedCreates(count: number): string {
  return `mutation ($input: ObservationCreate!) { ${Array.from({ length: count }, (_, index) => `write${index}: ${CREATE}`).join(' ')} }`;
}

describe('countMutationFields: one per mutation the operation runs', () => {
  test.each([
    ['one create', `mutation ($input: ObservationCreate!) { ${CREATE} }`, 1],
    ['50 aliased creates', aliasedCreates(50), 50],
    ['the same field twice, unaliased', `mutation ($input: ObservationCreate!) { ${CREATE} ${CREATE} }`, 2],
    ['creates inside inline fragments', `mutation ($input: ObservationCreate!) { a: ${CREATE} ... { b: ${CREATE} ... on MutationType { c: ${CREATE} } } }`, 3],
    ['creates in a fragment spread', `mutation ($input: ObservationCreate!) { ...Writes } fragment Writes on MutationType { a: ${CREATE} b: ${CREATE} }`, 2],
    ['__typename beside a create', `mutation ($input: ObservationCreate!) { __typename ${CREATE} }`, 1],
    ['a query', '{ ObservationList { id } a: ObservationList { id } }', 0],
  ])('%s', (_name, query, count) => {
    expect(countMutationFields(request(query))).toBe(count);
  });

  test('only the operation that runs counts, chosen by operationName', () => {
    const document = `query Read { ObservationList { id } } mutation Write($input: ObservationCreate!) { a: ${CREATE} b: ${CREATE} }`;
    expect(countMutationFields(request(document, 'Read'))).toBe(0);
    expect(countMutationFields(request(document, 'Write'))).toBe(2);
  });
});

describe('extraMutationUnits: what a document takes beyond its request', () => {
  test('one mutation or none: nothing beyond the request itself', () => {
    expect(extraMutationUnits(request(aliasedCreates(1)), 10)).toBe(0);
    expect(extraMutationUnits(request('{ ObservationList { id } }'), 10)).toBe(0);
  });

  test('n mutations: n - 1 more, up to the per-second budget', () => {
    expect(extraMutationUnits(request(aliasedCreates(10)), 10)).toBe(9);
  });

  test('more mutations than the budget of a second: refused outright, naming both numbers', () => {
    const error = appErrorOf(() => extraMutationUnits(request(aliasedCreates(50)), 10));
    expect(error.code).toBe('invalid_request');
    expect(error.details?.graphqlCode).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(error.message).toContain('holds 50 mutations');
    expect(error.message).toContain('at most 10 a second');
  });
});
