/**
 * The store's reused zlib engines: the same bytes as Node's `deflateRawSync`/`inflateRawSync`, whatever the size,
 * one engine per direction for any number of calls, and a corrupt record refused without breaking the next read.
 */
import { createHook } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { ReusedZlib } from './zlib-engine.ts';

const dictionary = Buffer.from('{"resourceType":"Communication","status":"completed","payload":[{"contentString":"', 'utf8');

function message(text: string): Buffer {
  return Buffer.from(JSON.stringify({ resourceType: 'Communication', status: 'completed', payload: [{ contentString: text }] }), 'utf8');
}

const inputs: [string, Buffer][] = [
  ['empty', Buffer.alloc(0)],
  ['a short message', message('Recheck the potassium in a week.')],
  ['text beyond ASCII', message('Ünïcödé ✓ 血压 🩺')],
  ['a long message that compresses', message('The patient reports headaches twice a week. '.repeat(20_000))],
  // Incompressible: its deflated form is larger than one output piece (64 KB) too.
  ['200 KB of random bytes', randomBytes(200_000)],
];

test.each(inputs)('%s deflates to the bytes deflateRawSync gives, and inflates back to itself', (_name, input) => {
  const compressor = new ReusedZlib('deflate', dictionary);
  const decompressor = new ReusedZlib('inflate', dictionary);
  // Twice, so the second call runs on an engine that was reset, not a new one.
  for (let round = 0; round < 2; round++) {
    const compressed = compressor.run(input);
    expect(compressed.equals(deflateRawSync(input, { dictionary }))).toBe(true);
    expect(decompressor.run(compressed).equals(input)).toBe(true);
    expect(inflateRawSync(compressed, { dictionary }).equals(input)).toBe(true);
  }
});

test('a thousand records written and read open one zlib engine each way, not one per call', () => {
  const opened: string[] = [];
  const hook = createHook({
    init(_id, type) {
      if (type === 'ZLIB') {
        opened.push(type);
      }
    },
  }).enable();
  try {
    const compressor = new ReusedZlib('deflate', dictionary);
    const decompressor = new ReusedZlib('inflate', dictionary);
    for (let index = 0; index < 1_000; index++) {
      const input = message(`Blood pressure ${100 + (index % 60)}/80 at visit ${index}.`);
      expect(decompressor.run(compressor.run(input)).equals(input)).toBe(true);
    }
  } finally {
    hook.disable();
  }
  expect(opened).toHaveLength(2);
});

test('a corrupt or cut-off record is refused with zlib’s reason, and the next record reads', () => {
  const decompressor = new ReusedZlib('inflate', dictionary);
  const good = message('Blood pressure 128/82 at the last visit.');
  const compressed = deflateRawSync(good, { dictionary });

  const corrupt = Buffer.from(compressed);
  corrupt[0] = 0xff;
  expect(() => decompressor.run(corrupt)).toThrow(expectedFailure(corrupt));
  expect(decompressor.run(compressed).equals(good)).toBe(true);

  const cutOff = compressed.subarray(0, compressed.length - 4);
  expect(() => decompressor.run(cutOff)).toThrow('unexpected end of file');
  expect(decompressor.run(compressed).equals(good)).toBe(true);
});

function expectedFailure(input: Buffer): string {
  try {
    inflateRawSync(input, { dictionary });
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('inflateRawSync read the corrupt record');
}
