/**
 * The stored form of a resource's JSON: compressed with dictionary 1, read back exactly; text from an older store
 * read as it is; a format this version does not know refused by name. Dictionary 1 is frozen: records on disk need
 * exactly its bytes.
 */
import { createHash } from 'node:crypto';
import { CONTENT_DICTIONARY_1 } from './content-dictionary.ts';
import { FORMAT_DEFLATE_DICTIONARY_1, decodeContent, encodeContent } from './content-codec.ts';

const reply = JSON.stringify({
  resourceType: 'Communication',
  id: '3f0e8c52-8a41-4f7e-9b0c-6d2f1e7a4b90',
  status: 'completed',
  category: [{ coding: [{ system: 'urn:fhirgate:communication-category', code: 'ai-response', display: 'AI Response' }] }],
  sender: { reference: 'Device/7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f', display: 'fhirgate AI agent' },
  recipient: [{ reference: 'Practitioner/1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d' }],
  sent: '2026-11-28T14:34:13.124Z',
  payload: [{ contentString: 'Recheck the potassium in a week; the last value was 5.4 mmol/L.' }],
  partOf: [{ reference: 'Communication/9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a' }],
  meta: {
    versionId: '6997b787-e8aa-471b-8874-4cda19faf6e8',
    lastUpdated: '2026-11-28T14:34:13.124Z',
    project: '0563e930-b6cf-4403-853d-04c8389befef',
    compartment: [{ reference: 'Project/0563e930-b6cf-4403-853d-04c8389befef' }],
  },
});

test('a resource’s JSON is stored compressed, in under a third of its bytes, and read back exactly', () => {
  const stored = encodeContent(reply);
  expect(stored[0]).toBe(FORMAT_DEFLATE_DICTIONARY_1);
  expect(stored.length).toBeLessThan(Buffer.byteLength(reply) / 3);
  expect(decodeContent(stored)).toBe(reply);
  const withText = JSON.stringify({ resourceType: 'Communication', payload: [{ contentString: 'Ünïcödé ✓ 血压 🩺' }] });
  expect(decodeContent(encodeContent(withText))).toBe(withText);
});

test('JSON text written by a store before schema 5 is read as it is', () => {
  expect(decodeContent(reply)).toBe(reply);
});

test('a stored format this version does not know is refused, naming it, never read as something else', () => {
  const stored = encodeContent(reply);
  stored[0] = 7;
  expect(() => decodeContent(stored)).toThrow('A resource in the store was written in format 7, which this version of fhirgate cannot read');
  expect(() => decodeContent(null)).toThrow('found NULL');
});

test('dictionary 1 is frozen: what was stored with it reads back', () => {
  // Changing the dictionary would make every record stored with it unreadable: a new one needs a new format byte.
  expect(createHash('sha256').update(CONTENT_DICTIONARY_1).digest('hex')).toBe('309b7e91db26c2b36bd7ac07c92b7c6535172a1565da4d2e4a1184e62faa8669');
  const storedBefore = Buffer.from('ASOy1ksyTTZLM07VNU0xSNY1STQ10rVMMTXVNUg2TDJKM0+0TDU0xNUdwFcIOeXk56coFID63qVFqQqGRhb6FkYKiSXgAT5QJCmUZRZnluiBnAoA', 'base64');
  expect(decodeContent(storedBefore)).toBe(
    '{"resourceType":"Communication","id":"0b5c6f3e-5d0c-4a52-9d55-0c1b2f7a9e11","status":"completed","payload":[{"contentString":"Blood pressure 128/82 at the last visit."}]}'
  );
});
