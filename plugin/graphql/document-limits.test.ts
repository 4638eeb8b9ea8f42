import { describe, expect, test } from '@jest/globals';
import { appErrorOf } from '../../test/support/app-error.ts';
import { Kind } from 'graphql';
import type { DocumentNode, SelectionSetNode } from 'graphql';
import { checkDocumentLimits, parseDocument } from './document-limits.ts';

/** Counts, per fragment, how often its selection set is read. */
function countSelectionReads(document: DocumentNode): Map<string, number> {
  const reads = new Map<string, number>();
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.FRAGMENT_DEFINITION) {
      continue;
    }
    const name = definition.name.value;
    const selectionSet: SelectionSetNode = definition.selectionSet;
    reads.set(name, 0);
    Object.defineProperty(definition, 'selectionSet', {
      get: () => {
        reads.set(name, (reads.get(name) ?? 0) + 1);
        return selectionSet;
      },
    });
  }
  return reads;
}


describe('document limits', () => {
  test('the parser stops at the token limit', () => {
    const query = `{ ${'PatientList { id } '.repeat(2000)} }`;
    const error = appErrorOf(() => parseDocument(query));
    expect(error.details).toEqual({ graphqlCode: 'GRAPHQL_PARSE_FAILED' });
    expect(error.message).toMatch(/more than 5000 tokens/);
  });

  test('a fragment bomb is refused without being expanded', () => {
    // Each fragment spreads the previous one ten times: 10^20 fields when expanded, so only a memoised count returns.
    const levels = Array.from({ length: 20 }, (_, index) => `fragment F${index + 1} on Patient { ${`...F${index} `.repeat(10)} }`);
    const query = `{ PatientList { ...F20 } } fragment F0 on Patient { id } ${levels.join(' ')}`;
    const error = appErrorOf(() => checkDocumentLimits(parseDocument(query)));
    expect(error.message).toMatch(/too many fields \(over a million, at most 100\)/);
  });

  test('each fragment is measured once, however often it is spread', () => {
    // Six levels of three spreads each: an expanding walk would read F0's selections 3^6 = 729 times.
    const levels = Array.from({ length: 6 }, (_, index) => `fragment F${index + 1} on Patient { ${`...F${index} `.repeat(3)} }`);
    const document = parseDocument(`{ PatientList { ...F6 } } fragment F0 on Patient { id } ${levels.join(' ')}`);
    const reads = countSelectionReads(document);

    expect(() => checkDocumentLimits(document, { maxFields: 1000 })).not.toThrow();
    // One read to look for introspection, one to measure the fragment.
    expect([...reads.values()]).toEqual(Array.from({ length: 7 }, () => 2));
  });

  test('a fragment that spreads itself is refused, not followed forever', () => {
    const error = appErrorOf(() => checkDocumentLimits(parseDocument('{ PatientList { ...A } } fragment A on Patient { id ...B } fragment B on Patient { ...A }')));
    expect(error.message).toMatch(/spreads itself/);
  });

  test('an unknown fragment is left for Medplum to report', () => {
    expect(() => checkDocumentLimits(parseDocument('{ PatientList { ...Missing } }'))).not.toThrow();
  });
});
