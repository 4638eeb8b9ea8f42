import { AppError } from '../errors.ts';
import type { ChatStreamEvent } from './chat-model.ts';
import { createUpstreamError, isAbortError } from './provider-errors.ts';
import { startUpstreamCall, type UpstreamCall } from './upstream-call.ts';
import { upstreamEvents, type UpstreamEventMapping } from './upstream-events.ts';

/** A provider chunk in these tests: text pieces, and whether it carries the reply's end. */
interface Chunk {
  readonly texts?: readonly string[];
  readonly end?: boolean;
}

/** An SDK-like stream of `chunks`, then `failure` if given; records whether it was closed before its end. */
function sdkStream(chunks: readonly Chunk[], failure?: Error): AsyncIterable<Chunk> & { closedEarly: boolean; read: number } {
  const stream = {
    closedEarly: false,
    read: 0,
    async *[Symbol.asyncIterator](): AsyncGenerator<Chunk> {
      let finished = false;
      try {
        for (const chunk of chunks) {
          stream.read += 1;
          yield chunk;
        }
        if (failure) throw failure;
        finished = true;
      } finally {
        stream.closedEarly = !finished && !failure;
      }
    },
  };
  return stream;
}

/** The mapping an adapter would give: a text event per piece; the end once a chunk said so (or `endsOnChunk`). */
function mapping(stream: AsyncIterable<Chunk>, options: { endsOnChunk?: boolean; signal?: AbortSignal; timeoutMs?: number } = {}): UpstreamEventMapping<Chunk> & { calls: UpstreamCall[] } {
  const calls: UpstreamCall[] = [];
  let ended = false;
  return {
    calls,
    start: () => {
      const call = startUpstreamCall('emulated', options.signal ?? new AbortController().signal, { timeoutMs: options.timeoutMs ?? 5_000, ...(options.timeoutMs === undefined ? {} : { totalTimeoutMs: options.timeoutMs }) }, true);
      calls.push(call);
      return call;
    },
    open: async () => stream,
    map: (chunk, emit) => {
      for (const text of chunk.texts ?? []) emit({ type: 'text', text });
      ended ||= chunk.end === true;
      return options.endsOnChunk === true && chunk.end === true;
    },
    end: () => {
      if (!ended) throw createUpstreamError('emulated', { kind: 'stream_incomplete' });
      return { type: 'finish', finishReason: 'stop', usage: undefined };
    },
    // The adapter's own reading of its SDK's failure: a cut stream (the default translation would say `unknown`).
    describe: (error) => (error instanceof Error && error.message === 'socket hang up' ? { kind: 'stream_cut' } : undefined),
  };
}

async function collect(events: AsyncIterable<ChatStreamEvent>): Promise<{ events: ChatStreamEvent[]; error?: unknown }> {
  const seen: ChatStreamEvent[] = [];
  try {
    for await (const event of events) seen.push(event);
  } catch (error) {
    return { events: seen, error };
  }
  return { events: seen };
}

const texts = (events: readonly ChatStreamEvent[]): string[] => events.flatMap((event) => (event.type === 'text' ? [event.text] : [event.type]));

describe('upstreamEvents', () => {
  it("hands out each chunk's events in order, passes over chunks without any, and ends with the finish", async () => {
    const stream = sdkStream([{ texts: ['Hel'] }, {}, { texts: ['lo', ', '] }, { texts: ['world'], end: true }, {}]);
    const { events, error } = await collect(upstreamEvents(mapping(stream)));
    expect(error).toBeUndefined();
    expect(texts(events)).toEqual(['Hel', 'lo', ', ', 'world', 'finish']);
    expect(stream.read).toBe(5);
  });

  it('starts the call only when first read, and ends it with the stream: its timer stopped, its signal left alone (the SDK holds nothing)', async () => {
    const events = mapping(sdkStream([{ texts: ['a'], end: true }]), { timeoutMs: 20 });
    const iterator = upstreamEvents(events);
    expect(events.calls).toHaveLength(0);
    const { error } = await collect(iterator);
    expect(error).toBeUndefined();
    expect(events.calls).toHaveLength(1);
    // Well past the call's time limits: a timer left running would abort the signal with a timeout.
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(events.calls[0]?.signal.aborted).toBe(false);
  });

  it('closes the provider stream when the chunk that ends the reply arrives, before handing out the end', async () => {
    const stream = sdkStream([{ texts: ['done'], end: true }, { texts: ['never read'] }]);
    const { events } = await collect(upstreamEvents(mapping(stream, { endsOnChunk: true })));
    expect(texts(events)).toEqual(['done', 'finish']);
    expect(stream.closedEarly).toBe(true);
    expect(stream.read).toBe(1);
  });

  it('closes the provider stream and finishes the call when the consumer stops reading', async () => {
    const stream = sdkStream([{ texts: ['one'] }, { texts: ['two'] }, { texts: ['three'], end: true }]);
    const events = mapping(stream);
    for await (const event of upstreamEvents(events)) {
      expect(event).toEqual({ type: 'text', text: 'one' });
      break;
    }
    expect(stream.closedEarly).toBe(true);
    expect(events.calls[0]?.signal.aborted).toBe(true);
  });

  it('fails a stream that ends without the reply ending, after the text it gave', async () => {
    const { events, error } = await collect(upstreamEvents(mapping(sdkStream([{ texts: ['half'] }]))));
    expect(texts(events)).toEqual(['half']);
    expect(AppError.isInstance(error) && error.details?.reason).toBe('stream_incomplete');
  });

  it("translates the SDK's failure with the adapter's description", async () => {
    const { events, error } = await collect(upstreamEvents(mapping(sdkStream([{ texts: ['partial'] }], new Error('socket hang up')))));
    expect(texts(events)).toEqual(['partial']);
    expect(AppError.isInstance(error)).toBe(true);
    expect(AppError.isInstance(error) && error.details?.reason).toBe('stream_cut');
  });

  it('reports an abort, not the end, when the caller leaves and the SDK ends its stream quietly', async () => {
    const controller = new AbortController();
    const quietOnAbort: AsyncIterable<Chunk> = {
      async *[Symbol.asyncIterator]() {
        yield { texts: ['before'] };
        controller.abort();
        // The openai and Anthropic streams end without an error when their signal aborts.
      },
    };
    const { events, error } = await collect(upstreamEvents(mapping(quietOnAbort, { signal: controller.signal })));
    expect(texts(events)).toEqual(['before']);
    expect(isAbortError(error)).toBe(true);
  });

  it('refuses at once, without a call, when the caller left before the stream began', async () => {
    const controller = new AbortController();
    controller.abort();
    const events = mapping(sdkStream([{ texts: ['never'], end: true }]), { signal: controller.signal });
    const { error } = await collect(upstreamEvents(events));
    expect(isAbortError(error)).toBe(true);
    expect(events.calls).toHaveLength(0);
  });
});
