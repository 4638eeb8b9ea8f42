import { validateResource } from '@medplum/core';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { MAX_PIECE, payloadText, textPayload, textPieces } from './fhir-text.ts';

describe('message text in FHIR strings', () => {
  beforeAll(() => loadFhirDefinitions());

  const valid = (payload: ReturnType<typeof textPayload>): void => {
    validateResource({ resourceType: 'Communication', status: 'completed', payload });
  };

  test.each([
    ['a short text', 'Hello there.'],
    ['only whitespace', ' \n\t '],
    ['longer than a FHIR string may be', 'token '.repeat(400_000)],
    ['a long text with emoji across a piece boundary', `${'a'.repeat(MAX_PIECE - 1)}😀${'b'.repeat(10)}`],
  ])('%s is kept in valid payload items and reads back exactly', (_name, text) => {
    const payload = textPayload(text);
    valid(payload);
    expect(payloadText(payload)).toBe(text);
    expect(payload.every((item) => (item.contentString?.length ?? 0) <= MAX_PIECE)).toBe(true);
  });

  test('no text is no item; a long request body is several extension values', () => {
    expect(textPayload('')).toEqual([]);
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(2_500_000) }] });
    const pieces = textPieces(body);
    expect(pieces).toHaveLength(3);
    expect(pieces.join('')).toBe(body);
  });
});
