import { describe, expect, test } from '@jest/globals';
import { appErrorOf } from '../../test/support/app-error.ts';
import { checkDocumentLimits, parseDocument } from './document-limits.ts';


describe('document limits', () => {
  test('the parser stops at the token limit', () => {
    const query = `{ ${'PatientList { id } '.repeat(2000)} }`;
    const error = appErrorOf(() => parseDocument(query));
    expect(error.details).toEqual({ graphqlCode: 'GRAPHQL_PARSE_FAILED' });
    expect(error.message).toMatch(/more than 5000 tokens/);
  });

  test('a fragment bomb is measured in linear time and refused', () => {
    // Each fragment spreads the previous one ten times: 10^20 fields when expanded
    const levels = Array.from({ length: 20 }, (_, index) => `fragment F${index + 1} on Patient { ${`...F${index} `.repeat(10)} }`);
    const query = `{ PatientList { ...F20 } } fragment F0 on Patient { id } ${levels.join(' ')}`;
    const started = performance.now();
    const error = appErrorOf(() => checkDocumentLimits(parseDocument(query)));
    expect(error.message).toMatch(/too many fields \(over a million, at most 100\)/);
    expect(performance.now() - started).toBeLessThan(500);
  });

  test('a fragment that spreads itself is refused, not followed forever', () => {
    const error = appErrorOf(() => checkDocumentLimits(parseDocument('{ PatientList { ...A } } fragment A on Patient { id ...B } fragment B on Patient { ...A }')));
    expect(error.message).toMatch(/spreads itself/);
  });

  test('an unknown fragment is left for Medplum to report', () => {
    expect(() => checkDocumentLimits(parseDocument('{ PatientList { ...Missing } }'))).not.toThrow();
  });
});
