/**
 * Raw deflate and inflate with a preset dictionary, synchronously, on one zlib engine per direction kept for the
 * life of the process and reset between calls. `deflateRawSync` and `inflateRawSync` create and free an engine on
 * every call (about 300 KB for a deflate), and the allocator keeps what they free: 20,000 calls of each left the
 * process about 100 MB larger for good, and 1,000 concurrent streams took the standalone host over its 400 MB goal.
 * A reused engine costs its memory once and halves a call's CPU (bench/findings.md, "Target 4's memory").
 *
 * Node offers reuse only through its asynchronous streams, so the engine is driven the way Node's own
 * `deflateRawSync` drives it (lib/zlib.js, `processChunkSync`): the stream's native handle, written synchronously,
 * its progress read from the stream's write state. Where a Node version lacks those, every call falls back to
 * `deflateRawSync`/`inflateRawSync`, which give the same bytes. A failed call (corrupt input) destroys its engine,
 * and the next call starts a new one.
 */
import { types } from 'node:util';
import { DeflateRaw, InflateRaw, constants, deflateRawSync, inflateRawSync } from 'node:zlib';

/** The part of a zlib stream's native handle a synchronous call needs (Node's lib/zlib.js). */
interface NativeHandle {
  reset(): void;
  writeSync(flush: number, input: Uint8Array, inputOffset: number, inputLength: number, output: Uint8Array, outputOffset: number, outputLength: number): void;
}

interface Engine {
  readonly stream: DeflateRaw | InflateRaw;
  readonly handle: NativeHandle;
  /** After a write: [output bytes left unwritten, input bytes left unread]. */
  readonly writeState: Uint32Array;
}

type Direction = 'deflate' | 'inflate';

/** Output is written here first; a result larger than it is gathered in more pieces of the same size. */
const OUTPUT_PIECE_BYTES = 64 * 1024;

/** A compressor or decompressor with one dictionary, reusing one engine for every call. */
export class ReusedZlib {
  private engine: Engine | undefined;
  private readonly output = Buffer.allocUnsafe(OUTPUT_PIECE_BYTES);
  private supported = true;
  private readonly direction: Direction;
  private readonly dictionary: Buffer;

  constructor(direction: Direction, dictionary: Buffer) {
    this.direction = direction;
    this.dictionary = dictionary;
  }

  /** The input deflated, or inflated, whole: the bytes `deflateRawSync`/`inflateRawSync` would give. */
  run(input: Uint8Array): Buffer {
    const engine = this.supported ? this.currentEngine() : undefined;
    if (!engine) {
      return this.direction === 'deflate'
        ? deflateRawSync(input, { dictionary: this.dictionary })
        : inflateRawSync(input, { dictionary: this.dictionary });
    }
    engine.handle.reset();
    const pieces: Buffer[] = [];
    let total = 0;
    let inputOffset = 0;
    for (;;) {
      engine.handle.writeSync(constants.Z_FINISH, input, inputOffset, input.length - inputOffset, this.output, 0, OUTPUT_PIECE_BYTES);
      const failure = engine.stream.errored;
      if (failure) {
        this.engine = undefined;
        throw failure;
      }
      const written = OUTPUT_PIECE_BYTES - engine.writeState[0];
      pieces.push(Buffer.from(this.output.subarray(0, written)));
      total += written;
      if (engine.writeState[0] !== 0) {
        return pieces.length === 1 ? pieces[0] : Buffer.concat(pieces, total);
      }
      // The output piece is full: go on from where the engine stopped reading.
      inputOffset = input.length - engine.writeState[1];
    }
  }

  private currentEngine(): Engine | undefined {
    if (this.engine && !this.engine.stream.destroyed) {
      return this.engine;
    }
    const options = { dictionary: this.dictionary };
    const stream = this.direction === 'deflate' ? new DeflateRaw(options) : new InflateRaw(options);
    // A failure destroys the stream, which emits 'error' later; it is thrown to the caller instead (run above).
    stream.on('error', () => undefined);
    const internals = stream as unknown as { _handle?: Partial<NativeHandle>; _writeState?: unknown };
    const handle = internals._handle;
    const writeState = internals._writeState;
    if (typeof handle?.reset !== 'function' || typeof handle.writeSync !== 'function' || !types.isUint32Array(writeState)) {
      this.supported = false;
      stream.destroy();
      return undefined;
    }
    this.engine = { stream, handle: handle as NativeHandle, writeState };
    return this.engine;
  }
}
