import { describe, expect, test } from '@jest/globals';
import { DEFAULT_MAX_VALIDATED_DOCUMENTS, ValidatedDocuments } from './validated-documents.ts';

describe('ValidatedDocuments', () => {
  test('keeps what is remembered, by the exact text of the document', () => {
    const documents = new ValidatedDocuments<string>();
    documents.remember('{ a }', 'first');
    expect(documents.get('{ a }')).toBe('first');
    expect(documents.get('{a}')).toBeUndefined();
    expect(documents.has('{ a }')).toBe(true);
    expect(documents.size).toBe(1);
  });

  test('is bounded: the least recently used document goes first', () => {
    const documents = new ValidatedDocuments<string>(2);
    documents.remember('{ a }', 'a');
    documents.remember('{ b }', 'b');
    documents.get('{ a }'); // a is now the most recently used
    documents.remember('{ c }', 'c'); // evicts b

    expect(documents.size).toBe(2);
    expect(documents.has('{ a }')).toBe(true);
    expect(documents.has('{ b }')).toBe(false);
    expect(documents.has('{ c }')).toBe(true);
  });

  test('remembering a kept document again replaces it and makes it the most recent', () => {
    const documents = new ValidatedDocuments<string>(2);
    documents.remember('{ a }', 'a');
    documents.remember('{ b }', 'b');
    documents.remember('{ a }', 'a again');
    documents.remember('{ c }', 'c'); // evicts b, not a
    expect(documents.get('{ a }')).toBe('a again');
    expect(documents.has('{ b }')).toBe(false);
  });

  test('holds 256 documents by default, and at least one whatever it is told', () => {
    const documents = new ValidatedDocuments<number>();
    for (let index = 0; index < DEFAULT_MAX_VALIDATED_DOCUMENTS + 10; index += 1) {
      documents.remember(`{ a${index} }`, index);
    }
    expect(documents.size).toBe(256);
    expect(documents.has('{ a9 }')).toBe(false);
    expect(documents.has('{ a10 }')).toBe(true);

    const tiny = new ValidatedDocuments<number>(0);
    tiny.remember('{ a }', 1);
    expect(tiny.get('{ a }')).toBe(1);
  });
});
