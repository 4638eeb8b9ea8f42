import { AppError } from '../errors.ts';
import type { ChatCompletion, ChatModel, ChatModelRequest, ChatStreamEvent } from './chat-model.ts';
import type { ResolvedModel } from './model-registry.ts';
import { withRetriesAndFallbacks, type RetryPolicy } from './resilient-chat-model.ts';

type Step = 'ok' | AppError | { readonly eventsThenFail: number; readonly error: AppError };

/** A model that answers each call with the next scripted step, and records the model names it was asked for. */
function scriptedModel(provider: string, steps: Step[]): ChatModel & { calls: string[] } {
  const calls: string[] = [];
  const next = (request: ChatModelRequest): Step => {
    calls.push(request.model);
    return steps.shift() ?? 'ok';
  };
  return {
    provider,
    calls,
    complete: async (request): Promise<ChatCompletion> => {
      const step = next(request);
      if (step !== 'ok') throw step instanceof AppError ? step : step.error;
      return { text: `from ${provider}`, finishReason: 'stop', usage: undefined };
    },
    stream: async function* (request): AsyncGenerator<ChatStreamEvent> {
      const step = next(request);
      if (step instanceof AppError) throw step;
      if (step !== 'ok') {
        for (let index = 0; index < step.eventsThenFail; index++) yield { type: 'text', text: `${index} ` };
        throw step.error;
      }
      yield { type: 'text', text: `from ${provider}` };
      yield { type: 'finish', finishReason: 'stop', usage: undefined };
    },
  };
}

const POLICY: RetryPolicy = { maxRetries: 2, baseDelayMs: 100, maxDelayMs: 5000 };
const unavailable = (retryAfterSeconds?: number): AppError =>
  new AppError('upstream_error', 'The LLM provider answered 503.', { isRetryable: true, retryAfterSeconds });
const badRequest = new AppError('upstream_error', 'The LLM provider refused the request (400).', { isRetryable: false });

function resolved(id: string, model: ChatModel, fallbacks: ResolvedModel[] = [], retries = POLICY): ResolvedModel {
  return { id, model, modelName: id.split('/')[1], retries, fallbacks };
}

function request(signal = new AbortController().signal): ChatModelRequest {
  return { model: 'ignored', messages: [{ role: 'user', content: 'hi' }], maxTokens: 10, signal };
}

async function collect(events: AsyncIterable<ChatStreamEvent>): Promise<string> {
  let text = '';
  for await (const event of events) if (event.type === 'text') text += event.text;
  return text;
}

describe('withRetriesAndFallbacks', () => {
  let waits: number[];
  const sleep = async (milliseconds: number, signal: AbortSignal): Promise<void> => {
    waits.push(milliseconds);
    if (signal.aborted) throw signal.reason;
  };
  beforeEach(() => {
    waits = [];
  });

  test('a failure that may pass is tried again with a doubling backoff, then answered', async () => {
    const primary = scriptedModel('a', [unavailable(), unavailable()]);
    const target = withRetriesAndFallbacks(resolved('a/m', primary), sleep);
    await expect(target.model.complete(request())).resolves.toMatchObject({ text: 'from a' });
    expect(primary.calls).toEqual(['m', 'm', 'm']);
    expect(waits).toEqual([100, 200]);
    expect(target.id).toBe('a/m');
  });

  test('the request is checked against the model asked for; a fallback that cannot honour it is passed over', async () => {
    const primary = scriptedModel('a', [unavailable(), unavailable(), unavailable()]);
    const picky = { ...scriptedModel('b', []), checkRequest: (): void => { throw new AppError('invalid_request', 'Invalid request: seed is not supported.'); } };
    const backup = scriptedModel('c', []);
    const target = withRetriesAndFallbacks(resolved('a/m', primary, [resolved('b/n', picky), resolved('c/o', backup)]), sleep);

    expect(() => target.model.checkRequest?.(request())).not.toThrow();
    await expect(target.model.complete(request())).resolves.toMatchObject({ text: 'from c' });
    expect(picky.calls).toEqual([]);
    expect(target.id).toBe('c/o');
  });

  test("the provider's Retry-After is waited for; one longer than allowed moves on to the fallback", async () => {
    const primary = scriptedModel('a', [unavailable(2), unavailable(60)]);
    const backup = scriptedModel('b', []);
    const target = withRetriesAndFallbacks(resolved('a/m', primary, [resolved('b/n', backup)]), sleep);
    await expect(target.model.complete(request())).resolves.toMatchObject({ text: 'from b' });
    expect(waits).toEqual([2000]);
    expect(primary.calls).toHaveLength(2);
    expect(backup.calls).toEqual(['n']);
    expect(target.id).toBe('b/n');
  });

  test('a refusal is passed on at once: no retry, no fallback', async () => {
    const primary = scriptedModel('a', [badRequest]);
    const backup = scriptedModel('b', []);
    const target = withRetriesAndFallbacks(resolved('a/m', primary, [resolved('b/n', backup)]), sleep);
    await expect(target.model.complete(request())).rejects.toBe(badRequest);
    expect(primary.calls).toHaveLength(1);
    expect(backup.calls).toHaveLength(0);
  });

  test('when every model keeps failing, the last failure is what the caller gets', async () => {
    const last = unavailable();
    const primary = scriptedModel('a', [unavailable(), unavailable(), unavailable()]);
    const backup = scriptedModel('b', [unavailable(), unavailable(), last]);
    const target = withRetriesAndFallbacks(resolved('a/m', primary, [resolved('b/n', backup)]), sleep);
    await expect(target.model.complete(request())).rejects.toBe(last);
    expect(primary.calls).toHaveLength(3);
    expect(backup.calls).toHaveLength(3);
  });

  test('a stream that fails before its first event is tried again; the fallback that answers is the one named', async () => {
    const primary = scriptedModel('a', [unavailable(), unavailable(), unavailable()]);
    const backup = scriptedModel('b', []);
    const target = withRetriesAndFallbacks(resolved('a/m', primary, [resolved('b/n', backup)]), sleep);
    await expect(collect(target.model.stream(request()))).resolves.toBe('from b');
    expect(target.id).toBe('b/n');
  });

  test('a stream that fails after its first event is never tried again', async () => {
    const cut = unavailable();
    const primary = scriptedModel('a', [{ eventsThenFail: 2, error: cut }]);
    const target = withRetriesAndFallbacks(resolved('a/m', primary), sleep);
    let text = '';
    await expect(
      (async () => {
        for await (const event of target.model.stream(request())) if (event.type === 'text') text += event.text;
      })()
    ).rejects.toBe(cut);
    expect(text).toBe('0 1 ');
    expect(primary.calls).toHaveLength(1);
  });

  test('a stream whose first event is a call is never tried again after it, and its call events pass through as they are', async () => {
    const cut = unavailable();
    const call: ChatStreamEvent = { type: 'tool_call', index: 0, id: 'call_1', name: 'read_patient', arguments: '{}' };
    const asked: string[] = [];
    const primary: ChatModel = {
      provider: 'a',
      complete: async () => {
        throw cut;
      },
      stream: async function* (streamRequest) {
        asked.push(streamRequest.model);
        yield call;
        throw cut;
      },
    };
    const backup = scriptedModel('b', []);
    const target = withRetriesAndFallbacks(resolved('a/m', primary, [resolved('b/n', backup)]), sleep);
    const seen: ChatStreamEvent[] = [];
    await expect(
      (async () => {
        for await (const event of target.model.stream(request())) seen.push(event);
      })()
    ).rejects.toBe(cut);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBe(call);
    expect(asked).toHaveLength(1);
    expect(backup.calls).toHaveLength(0);
  });

  test('a caller who leaves during the backoff stops the retries', async () => {
    const controller = new AbortController();
    const primary = scriptedModel('a', [unavailable(), unavailable()]);
    const target = withRetriesAndFallbacks(
      resolved('a/m', primary),
      async (_milliseconds, signal) => {
        controller.abort(new DOMException('The client left.', 'AbortError'));
        throw signal.reason;
      }
    );
    await expect(target.model.complete(request(controller.signal))).rejects.toMatchObject({ name: 'AbortError' });
    expect(primary.calls).toHaveLength(1);
  });

  test('without retries or fallbacks the model is used as it is', () => {
    const primary = resolved('a/m', scriptedModel('a', []), [], { ...POLICY, maxRetries: 0 });
    expect(withRetriesAndFallbacks(primary, sleep)).toBe(primary);
  });
});
