/**
 * A provider's stream as the port's events: the call started on the first `next()`, the SDK's stream opened and
 * read under the call's timeouts (`upstream-call.ts`), each chunk mapped by the adapter to the events it gives, the
 * end checked, and every failure translated as the call translates it. Each adapter says only how it opens the
 * stream, maps a chunk and ends.
 *
 * A plain iterator, not an async generator: with a thousand streams waiting at once, a generator's pending request,
 * promise and await are what the young generation's collections copy, once for each layer (bench/findings.md,
 * "Stream layers"). `next()` is called one at a time, as `for await` does.
 */
import type { ChatStreamEvent } from './chat-model.ts';
import type { UpstreamFailure } from './provider-errors.ts';
import type { UpstreamCall } from './upstream-call.ts';

/** How one adapter's SDK stream becomes the port's events. */
export interface UpstreamEventMapping<Chunk> {
  /** Starts the call (its timers run from here); called on the first `next()`, so a stream never read costs nothing. */
  readonly start: () => UpstreamCall;
  /** Opens the SDK's stream with the call's signal. */
  readonly open: (call: UpstreamCall) => Promise<AsyncIterable<Chunk>>;
  /** Hands `emit` the events of one chunk, in order (often one, sometimes none); true when the chunk ends the reply. */
  readonly map: (chunk: Chunk, emit: (event: ChatStreamEvent) => void) => boolean | void;
  /** The closing event once the reply ended; throws when the stream ended without a reply's end. */
  readonly end: () => ChatStreamEvent;
  /** The adapter's description of its SDK's errors (`UpstreamCall.toError`). */
  readonly describe: (error: unknown) => UpstreamFailure | undefined;
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/** The events of one streamed call; see the file comment. */
export function upstreamEvents<Chunk>(mapping: UpstreamEventMapping<Chunk>): AsyncIterableIterator<ChatStreamEvent> {
  let call: UpstreamCall | undefined;
  let source: AsyncIterator<Chunk> | undefined;
  // Events of the last chunk not yet handed out (a chunk with text and a call's fragment gives two).
  const queued: ChatStreamEvent[] = [];
  let finished = false;
  const emit = (event: ChatStreamEvent): void => {
    queued.push(event);
  };
  const take = (): IteratorResult<ChatStreamEvent> => ({ done: false, value: queued.shift() as ChatStreamEvent });

  const finish = (answered = false): void => {
    finished = true;
    call?.finish(answered);
  };
  const fail = (error: unknown): never => {
    finish();
    throw call ? call.toError(error, mapping.describe) : error;
  };
  const closeSource = async (): Promise<void> => {
    await source?.return?.();
  };
  // The reply ended: a stop is not an end (the openai and Anthropic streams end quietly when their signal aborts).
  const ending = (): IteratorResult<ChatStreamEvent> => {
    try {
      call?.throwIfStopped();
      emit(mapping.end());
      // The source ended, or was closed (which cancels its request): nothing of the call is left to release.
      finish(true);
      return take();
    } catch (error) {
      return fail(error);
    }
  };
  // Plain functions, not async ones: a chunk's one event resolves the consumer's `next()` without further hops.
  const afterChunk = (result: IteratorResult<Chunk>): IteratorResult<ChatStreamEvent> | Promise<IteratorResult<ChatStreamEvent>> => {
    if (result.done === true) {
      return ending();
    }
    let last: boolean | void;
    try {
      last = mapping.map(result.value, emit);
    } catch (error) {
      // The SDK's stream is closed (its request released) before the failure is handed out.
      return closeSource().then(() => fail(error), () => fail(error));
    }
    if (last === true) {
      return closeSource().then(ending, fail);
    }
    // A chunk that gives no event (a usage chunk, a filter verdict) is passed over.
    return queued.length > 0 ? take() : pull();
  };
  const pull = (): Promise<IteratorResult<ChatStreamEvent>> => (source as AsyncIterator<Chunk>).next().then(afterChunk, fail);
  const open = async (started: UpstreamCall): Promise<IteratorResult<ChatStreamEvent>> => {
    try {
      source = started.guard(await mapping.open(started));
    } catch (error) {
      return fail(error);
    }
    return pull();
  };

  const events: AsyncIterableIterator<ChatStreamEvent> = {
    [Symbol.asyncIterator]: () => events,
    next: () => {
      if (queued.length > 0) {
        return Promise.resolve(take());
      }
      if (finished) {
        return Promise.resolve(DONE);
      }
      if (source) {
        return pull();
      }
      try {
        call = mapping.start();
      } catch (error) {
        // Refused before it began (the caller had already left): nothing to translate or release.
        finished = true;
        return Promise.reject(error as Error);
      }
      return open(call);
    },
    // The consumer stopped reading: the SDK's stream is closed, which cancels its request, and the call is over.
    return: async () => {
      queued.length = 0;
      if (!finished) {
        try {
          await closeSource();
        } finally {
          finish();
        }
      }
      return DONE;
    },
  };
  return events;
}
