/**
 * Retries and fallbacks around a resolved model. A call that fails with a failure that may pass (the AppError says
 * `isRetryable`: 429, 5xx, timeouts, lost connections) is tried again after a backoff, or after the provider's
 * `Retry-After`, up to the model's `maxRetries`; then the configured fallback models are tried in order, each with
 * its own retries. Never once a byte of the reply may have reached the client: a stream is retried only if it
 * failed before its first event. A refusal (400, 401, 403, 404, a content filter) is passed on at once, and so is
 * the caller going away.
 */
import { AppError } from '../errors.ts';
import type { ChatModel, ChatModelRequest, ChatStreamEvent } from './chat-model.ts';
import type { ResolvedModel } from './model-registry.ts';
import { isAbortError } from './provider-errors.ts';

/** How a model's failed calls are retried. */
export interface RetryPolicy {
  readonly maxRetries: number;
  /** The first backoff; it doubles with each retry. */
  readonly baseDelayMs: number;
  /** Longest wait before a retry; a longer `Retry-After` moves on to the next model instead. */
  readonly maxDelayMs: number;
}

/** A model with retries and fallbacks; `id` names the model that is answering (the first one until another does). */
export function withRetriesAndFallbacks(target: ResolvedModel, sleep: Sleep = sleepUnlessAborted): ResolvedModel {
  const candidates = [target, ...target.fallbacks];
  if (candidates.length === 1 && target.retries.maxRetries === 0) {
    return target;
  }
  let answering = target;
  const model: ChatModel = {
    provider: target.model.provider,
    // The request is checked against the model asked for; a fallback that cannot honour it is left out.
    checkRequest: (request) => target.model.checkRequest?.(request),
    complete: async (request) => {
      const tries = attempts(usable(candidates, request), request.signal, sleep);
      for (let next = await tries.next(); ; ) {
        const candidate = next.value;
        try {
          const completion = await candidate.model.complete({ ...request, model: candidate.modelName });
          answering = candidate;
          return completion;
        } catch (error) {
          // Throws the error when it is not to be retried, or when no try is left.
          next = await tries.next(error);
        }
      }
    },
    stream: (request) =>
      streamWithRetries(usable(candidates, request), request, sleep, (candidate) => {
        answering = candidate;
      }),
  };
  return {
    ...target,
    model,
    get id() {
      return answering.id;
    },
  };
}

/** The model asked for, and the fallbacks that take every field of the request. */
function usable(candidates: readonly ResolvedModel[], request: ChatModelRequest): readonly ResolvedModel[] {
  return candidates.filter((candidate, index) => {
    try {
      if (index > 0) {
        candidate.model.checkRequest?.(request);
      }
      return true;
    } catch {
      return false;
    }
  });
}

/** How to wait before a retry; rejects with the abort error when the caller goes away meanwhile. */
export type Sleep = (milliseconds: number, signal: AbortSignal) => Promise<void>;

/**
 * Yields the model to try next; is given back each try's error, and decides: the same model again (after a wait),
 * the next model, or giving up (throws the error).
 */
async function* attempts(candidates: readonly ResolvedModel[], signal: AbortSignal, sleep: Sleep): AsyncGenerator<ResolvedModel, never, unknown> {
  for (let index = 0; index < candidates.length; index++) {
    const candidate = candidates[index];
    const isLast = index === candidates.length - 1;
    for (let retry = 0; ; retry++) {
      const error = yield candidate;
      if (!mayPass(error) || signal.aborted) {
        throw error;
      }
      const wait = waitBefore(retry, candidate.retries, error);
      if (retry >= candidate.retries.maxRetries || wait === undefined) {
        if (isLast) {
          throw error;
        }
        break;
      }
      await sleep(wait, signal);
    }
  }
  throw new Error('no model to try');
}

/**
 * The stream of the first candidate that answers: a try that fails before its first event is retried (or the next
 * model tried); once an event has come, its stream is the caller's, `next()` passing straight through, so a long
 * stream pays nothing here per event (a generator layer would: bench/findings.md, "Stream layers").
 */
function streamWithRetries(
  candidates: readonly ResolvedModel[],
  request: ChatModelRequest,
  sleep: Sleep,
  onAnswer: (candidate: ResolvedModel) => void
): AsyncIterableIterator<ChatStreamEvent> {
  // The try under way, then the stream that answered (`started` once its first event came).
  let current: AsyncIterator<ChatStreamEvent> | undefined;
  let started = false;
  let finished = false;
  const firstEvent = async (): Promise<IteratorResult<ChatStreamEvent>> => {
    const tries = attempts(candidates, request.signal, sleep);
    for (let next = await tries.next(); ; ) {
      const candidate = next.value;
      current = candidate.model.stream({ ...request, model: candidate.modelName })[Symbol.asyncIterator]();
      try {
        const result = await current.next();
        if (result.done) {
          finished = true;
        } else {
          started = true;
          onAnswer(candidate);
        }
        return result;
      } catch (error) {
        current = undefined;
        next = await tries.next(error);
      }
    }
  };
  const stream: AsyncIterableIterator<ChatStreamEvent> = {
    [Symbol.asyncIterator]: () => stream,
    next: () => (finished ? Promise.resolve({ done: true, value: undefined }) : started && current ? current.next() : firstEvent()),
    return: async (value?: unknown) => {
      finished = true;
      const closing = current;
      current = undefined;
      await closing?.return?.(value);
      return { done: true, value: undefined };
    },
  };
  return stream;
}

/** A failure another try may not meet: the provider's own retryable failures, never the caller leaving. */
function mayPass(error: unknown): boolean {
  return !isAbortError(error) && AppError.isInstance(error) && error.isRetryable;
}

/** The wait before retry number `retry` (0-based), or undefined when the provider asks for longer than allowed. */
function waitBefore(retry: number, policy: RetryPolicy, error: unknown): number | undefined {
  const retryAfterSeconds = AppError.isInstance(error) ? error.retryAfterSeconds : undefined;
  if (retryAfterSeconds !== undefined) {
    const asked = retryAfterSeconds * 1000;
    return asked > policy.maxDelayMs ? undefined : asked;
  }
  return Math.min(policy.baseDelayMs * 2 ** retry, policy.maxDelayMs);
}

function sleepUnlessAborted(milliseconds: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, milliseconds);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
