/**
 * How a resource's JSON is kept in the store's `content` columns: deflate with a preset dictionary of fhirgate's
 * own JSON (content-dictionary.ts), behind one byte naming the format. A chat message of 1.6 KB takes about 300
 * bytes; writing one costs about 30 µs, reading one about 10 µs (bench/bytes-per-turn/). One engine each way is kept
 * for the process (zlib-engine.ts).
 *
 * Text in a `content` column is JSON as written by a store of schema 4 or older: it is read as it is, so a data
 * folder keeps every record it had, and its older rows are not rewritten.
 */
import type { SQLOutputValue } from 'node:sqlite';
import { CONTENT_DICTIONARY_1 } from './content-dictionary.ts';
import { ReusedZlib } from './zlib-engine.ts';

/** The first byte of a stored BLOB: deflate (raw) with dictionary 1. */
export const FORMAT_DEFLATE_DICTIONARY_1 = 1;

const compressor = new ReusedZlib('deflate', CONTENT_DICTIONARY_1);
const decompressor = new ReusedZlib('inflate', CONTENT_DICTIONARY_1);

/** The stored form of a resource's JSON. */
export function encodeContent(json: string): Uint8Array<ArrayBuffer> {
  const compressed = compressor.run(Buffer.from(json, 'utf8'));
  const stored = Buffer.allocUnsafe(compressed.length + 1);
  stored[0] = FORMAT_DEFLATE_DICTIONARY_1;
  compressed.copy(stored, 1);
  return stored;
}

/** The JSON of a stored `content` value: text as it is, or a BLOB of a known format. */
export function decodeContent(value: SQLOutputValue | undefined): string {
  if (typeof value === 'string') {
    return value;
  }
  if (value instanceof Uint8Array && value.length > 0) {
    if (value[0] === FORMAT_DEFLATE_DICTIONARY_1) {
      return decompressor.run(value.subarray(1)).toString('utf8');
    }
    throw new Error(`A resource in the store was written in format ${value[0]}, which this version of fhirgate cannot read`);
  }
  throw new Error(`Expected a resource's stored content, found ${value === null ? 'NULL' : typeof value}`);
}
