/**
 * The lifetime of one call to a provider: the signal handed to the SDK (the caller's abort or fhirgate's timeout,
 * whichever comes first) and the translation of whatever the SDK throws into the failure contract of
 * `chat-model.ts`. Every adapter goes through it, so timeouts and aborts behave the same for every provider.
 *
 * Timeouts (all configurable per provider, `provider-config.ts`):
 * - `timeoutMs`: the whole reply of `complete`; for `stream`, each wait for the next event after the first, so a
 *   stream that stalls fails while one that keeps going does not;
 * - `firstTokenTimeoutMs` (streams; default `timeoutMs`): the wait for the response and its first event;
 * - `totalTimeoutMs` (default none): the whole call, however it goes;
 * - `connectTimeoutMs`: establishing the connection, enforced by the connection pool (`http-dispatcher.ts`).
 * Time the consumer spends with an event (a slow client downstream) is not the provider's and is not counted in
 * the waits (it is in the total).
 */
import { AppError } from '../errors.ts';
import { isConnectTimeout } from './http-dispatcher.ts';
import { createAbortError, createUpstreamError, describeTransportFailure } from './provider-errors.ts';
import type { UpstreamFailure } from './provider-errors.ts';

/** How long a call may wait; see the file comment. */
export interface UpstreamTimeouts {
  readonly timeoutMs: number;
  /** Establishing the connection (TCP and TLS); enforced by the connection pool (`http-dispatcher.ts`). */
  readonly connectTimeoutMs?: number;
  readonly firstTokenTimeoutMs?: number;
  readonly totalTimeoutMs?: number;
}

/** The longest any limit allows: the SDK's own timeout is set to it, so fhirgate's limits are the ones that act. */
export function longestLimitMs(timeouts: UpstreamTimeouts): number {
  return Math.max(timeouts.timeoutMs, timeouts.firstTokenTimeoutMs ?? 0, timeouts.totalTimeoutMs ?? 0);
}

/** One call in flight. */
export interface UpstreamCall {
  /** Pass to the SDK: aborted by the caller's signal or when the timeout passes. */
  readonly signal: AbortSignal;
  /**
   * Iterates an SDK stream with the timeout running only while waiting for its next event; breaking out of the
   * loop returns the SDK's iterator, which cancels its request, and so does a failed wait. A plain iterator, not
   * an async generator: with a thousand streams waiting at once, each generator layer's pending objects are what
   * the young generation's collections copy (bench/findings.md, "Stream layers").
   */
  guard<T>(source: AsyncIterable<T>): AsyncIterableIterator<T>;
  /**
   * Stops the timer and aborts `signal`, releasing whatever the SDK still holds (a body it stopped reading after
   * the last event, or after the consumer broke out of the stream); call it once the call is over, however it ended.
   * `answered`: the SDK read the answer to its end (a JSON answer returned, a stream that ended or was closed), so
   * it holds nothing and `signal` is left as it is: aborting it costs 50–80 µs of event dispatch for nothing.
   */
  finish(answered?: boolean): void;
  /**
   * Throws when the call was aborted or timed out. The openai and Anthropic streams end quietly when their signal
   * aborts, so an adapter calls this after its loop, before taking the end of the loop for the end of the reply.
   */
  throwIfStopped(): void;
  /** The error to throw for something the SDK threw, using the adapter's own description of its SDK errors. */
  toError(error: unknown, describeSdkError: (error: unknown) => UpstreamFailure | undefined): Error;
}

/** How far apart the timers' clock and `performance.now()` may be. */
const TIMER_RESOLUTION_MS = 1;

// The reason a finished call's signal is aborted with: made once, since a DOMException records a stack.
const CALL_OVER = new DOMException('The LLM call is over.', 'AbortError');

/** Starts a call (`streaming`: the first wait is for the first event); throws the abort error at once when the caller's signal is already aborted. */
export function startUpstreamCall(provider: string, callerSignal: AbortSignal, timeouts: UpstreamTimeouts, streaming = false): UpstreamCall {
  if (callerSignal.aborted) {
    throw createAbortError(callerSignal);
  }
  // The SDK's signal: aborted by the caller's signal or by a limit. One controller the caller's signal aborts, not
  // `AbortSignal.any`: a composite signal's `aborted`, which the openai SDK reads for every event of a stream,
  // walks its sources each time.
  const deadline = new AbortController();
  const onCallerAbort = (): void => deadline.abort(callerSignal.reason);
  callerSignal.addEventListener('abort', onCallerAbort, { once: true });
  // The limit that ran out, for the error message; undefined while none has.
  let timedOutAfterMs: number | undefined;
  const expire = (limitMs: number): void => {
    timedOutAfterMs ??= limitMs;
    deadline.abort(new DOMException(`No answer within ${limitMs} ms.`, 'TimeoutError'));
  };
  // The wait under way (its limit and when it runs out); no limit while the consumer has the event. A stream waits
  // once per event, so a wait only moves the deadline: the timer is set once for a stretch of waits, and when it
  // fires before the deadline it sleeps the rest of the way.
  let waitLimitMs: number | undefined;
  let waitEndsAt = 0;
  let timer: NodeJS.Timeout | undefined;
  let timerAt = 0;
  const check = (): void => {
    timer = undefined;
    if (waitLimitMs === undefined) {
      return;
    }
    const remaining = waitEndsAt - performance.now();
    // Timers keep the event loop's millisecond clock, which may run up to a millisecond behind this one: a timer
    // that fires within it of the deadline has reached it (sleeping on would let the SDK's own timer win the race).
    if (remaining < TIMER_RESOLUTION_MS) {
      expire(waitLimitMs);
      return;
    }
    timer = setTimeout(check, remaining);
    timerAt = waitEndsAt;
  };
  const arm = (limitMs: number): void => {
    waitLimitMs = limitMs;
    waitEndsAt = performance.now() + limitMs;
    if (timer === undefined || timerAt > waitEndsAt) {
      clearTimeout(timer);
      timer = setTimeout(check, limitMs);
      timerAt = waitEndsAt;
    }
  };
  const stopWaiting = (): void => {
    waitLimitMs = undefined;
  };
  arm(streaming ? (timeouts.firstTokenTimeoutMs ?? timeouts.timeoutMs) : timeouts.timeoutMs);
  const total = timeouts.totalTimeoutMs === undefined ? undefined : setTimeout(() => expire(timeouts.totalTimeoutMs ?? 0), timeouts.totalTimeoutMs);
  let firstEventSeen = false;

  const stoppedError = (): Error | undefined => {
    if (callerSignal.aborted) {
      return createAbortError(callerSignal);
    }
    if (timedOutAfterMs !== undefined) {
      return createUpstreamError(provider, { kind: 'timeout' }, timedOutAfterMs);
    }
    return undefined;
  };

  return {
    signal: deadline.signal,
    guard: <T>(source: AsyncIterable<T>): AsyncIterableIterator<T> => {
      const iterator = source[Symbol.asyncIterator]();
      let done = false;
      const close = async (): Promise<void> => {
        if (!done) {
          done = true;
          await iterator.return?.();
        }
      };
      // Made once per stream, not per event: each event's wait then allocates only its promise.
      const onResult = (result: IteratorResult<T>): IteratorResult<T> => {
        firstEventSeen = true;
        stopWaiting();
        done ||= result.done === true;
        return result;
      };
      const onError = async (error: unknown): Promise<never> => {
        await close();
        throw error;
      };
      const guarded: AsyncIterableIterator<T> = {
        [Symbol.asyncIterator]: () => guarded,
        next: () => {
          if (done) {
            return Promise.resolve({ done: true, value: undefined });
          }
          // The first event is still under the first-token limit armed at the start.
          if (firstEventSeen) {
            arm(timeouts.timeoutMs);
          }
          return iterator.next().then(onResult, onError);
        },
        return: async () => {
          await close();
          return { done: true, value: undefined };
        },
      };
      return guarded;
    },
    finish: (answered = false) => {
      clearTimeout(timer);
      clearTimeout(total);
      callerSignal.removeEventListener('abort', onCallerAbort);
      if (!answered) {
        deadline.abort(CALL_OVER);
      }
    },
    throwIfStopped: () => {
      const error = stoppedError();
      if (error) {
        throw error;
      }
    },
    toError: (error, describeSdkError) => {
      // An abort or a timeout makes the SDK throw whatever its transport reports; what matters is why it stopped.
      const stopped = stoppedError();
      if (stopped) {
        return stopped;
      }
      if (AppError.isInstance(error)) {
        return error;
      }
      if (isConnectTimeout(error)) {
        return createUpstreamError(provider, { kind: 'timeout' }, timeouts.connectTimeoutMs);
      }
      const failure: UpstreamFailure = describeSdkError(error) ??
        describeTransportFailure(error) ?? { kind: 'unknown', errorName: readName(error) };
      return createUpstreamError(provider, failure, timedOutAfterMs ?? timeouts.timeoutMs);
    },
  };
}

function readName(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'name' in error && typeof error.name === 'string') {
    return error.name;
  }
  return undefined;
}
