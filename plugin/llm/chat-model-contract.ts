/**
 * Test support, not production code: the behaviour every ChatModel adapter must show against the LLM emulator
 * (replies, usage, what the provider receives, every failure of the table in `provider-errors.ts`, aborts and
 * timeouts). Each adapter's test file runs it with its own emulator and adds its provider's specifics.
 */
import { createServer } from 'node:net';
import { expect, jest, test } from '@jest/globals';
import { AppError } from '../errors.ts';
import { countPromptTokens, countTokens, createLogprobs } from '../../test/emulator/index.ts';
import type { LlmEmulator, ProviderName, ReceivedRequest } from '../../test/emulator/index.ts';
import type { ChatMessage, ChatModel, ChatModelRequest, ChatStreamEvent, ChatTokenLogprob } from './chat-model.ts';
import { isAbortError } from './provider-errors.ts';

/** Where an adapter under test sends its requests. */
export interface ContractTarget {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly timeoutMs: number;
}

/** What the contract needs to know about one adapter. */
export interface ChatModelContract {
  /** The emulator's name for the wire format the adapter speaks. */
  readonly wireFormat: ProviderName;
  /** The model (or deployment) the requests name. */
  readonly model: string;
  readonly emulator: () => LlmEmulator;
  createModel(target: ContractTarget): ChatModel;
  /** The token cap and temperature as they appear in the body the provider received. */
  readMaxTokens(body: Record<string, unknown>): unknown;
  readTemperature(body: Record<string, unknown>): unknown;
  /**
   * Where the ids of calls come from: `provider` (its wire format has them, and it checks that each result answers
   * a call: OpenAI, Anthropic) or `adapter` (Ollama's has none: the adapter makes them, and a result names its
   * call's function instead). Read by `describeToolCallingContract`.
   */
  readonly toolCallIds: 'provider' | 'adapter';
  /** Whether the provider takes a tool choice (Ollama does not). */
  readonly takesToolChoice: boolean;
}

/** A key that must never appear in an error. */
export const TEST_API_KEY = 'sk-test-4f9a2c81d7e6b5a3';

/** A conversation whose text must never appear in an error either. */
export const CONVERSATION: readonly ChatMessage[] = [
  { role: 'system', content: 'You are a careful clinical assistant.' },
  { role: 'user', content: 'What is a normal resting heart rate?' },
  { role: 'assistant', content: 'Between 60 and 100 beats per minute.' },
  { role: 'user', content: 'And for trained athletes?' },
];
const EXPECTED_REPLY = 'Echo: And for trained athletes?';

/** The result of reading a stream to its end, or to its error. */
export interface CollectedStream {
  readonly text: string;
  readonly events: readonly ChatStreamEvent[];
  readonly error: unknown;
}

/** Reads a stream to its end; `onText` may act (abort, ...) after each text event. */
export async function collectStream(
  stream: AsyncIterable<ChatStreamEvent>,
  onText?: (text: string) => void,
): Promise<CollectedStream> {
  const events: ChatStreamEvent[] = [];
  let text = '';
  try {
    for await (const event of stream) {
      events.push(event);
      if (event.type === 'text') {
        text += event.text;
        onText?.(text);
      }
    }
    return { text, events, error: undefined };
  } catch (error) {
    return { text, events, error };
  }
}

/** Waits until the emulator's first record matches (outcomes settle a little after the client sees the end). */
export async function waitForRecord(
  emulator: LlmEmulator,
  predicate: (record: ReceivedRequest) => boolean,
): Promise<ReceivedRequest> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const record = emulator.received[0];
    if (record && predicate(record)) {
      return record;
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`no matching record; received: ${JSON.stringify(emulator.received.map((record) => record.outcome))}`);
}

/** Narrows a caught value to an AppError, failing the test otherwise. */
export function expectAppError(error: unknown): AppError {
  if (!AppError.isInstance(error)) {
    throw new Error(`expected an AppError, got ${String(error)}`, { cause: error });
  }
  return error;
}

/** Checks that nothing the error carries repeats the key or the conversation. */
export function expectNoSecrets(error: AppError): void {
  const rendered = JSON.stringify({
    message: error.message,
    details: error.details,
    cause: error.cause instanceof Error ? `${error.cause.name}: ${error.cause.message}` : error.cause,
  });
  expect(rendered).not.toContain(TEST_API_KEY);
  for (const message of CONVERSATION) {
    expect(rendered).not.toContain(message.content);
  }
}

/** The emulator's log probabilities of `tokens` (`createLogprobs`) as an adapter must report them, UTF-8 bytes included. */
export function expectedLogprobs(tokens: readonly string[], top: number): ChatTokenLogprob[] {
  const bytes = (token: string): number[] => [...Buffer.from(token, 'utf8')];
  return createLogprobs(tokens, top).map((token) => ({
    token: token.token,
    logprob: token.logprob,
    bytes: bytes(token.token),
    topLogprobs: token.top.map((alternative) => ({ ...alternative, bytes: bytes(alternative.token) })),
  }));
}

/** A request to `model` with the test conversation; `overrides` replace any field. */
export function createTestRequest(model: string, overrides: Partial<ChatModelRequest> = {}): ChatModelRequest {
  return { model, messages: CONVERSATION, maxTokens: 100, signal: new AbortController().signal, ...overrides };
}

/** Registers the contract's tests in the current describe block (the tool cases: `chat-model-tool-contract.ts`). */
export function describeChatModelContract(contract: ChatModelContract): void {
  const createModel = (timeoutMs = 5000): ChatModel =>
    contract.createModel({ baseUrl: contract.emulator().url, apiKey: TEST_API_KEY, timeoutMs });
  const createRequest = (overrides: Partial<ChatModelRequest> = {}): ChatModelRequest =>
    createTestRequest(contract.model, { temperature: 0.3, ...overrides });
  const expectedUsage = {
    promptTokens: countPromptTokens(CONVERSATION),
    completionTokens: countTokens(EXPECTED_REPLY),
  };
  const failComplete = async (overrides: Partial<ChatModelRequest> = {}, timeoutMs?: number): Promise<AppError> =>
    expectAppError(await createModel(timeoutMs).complete(createRequest(overrides)).catch((error: unknown) => error));

  test('complete returns the reply, its finish reason and usage', async () => {
    const completion = await createModel().complete(createRequest());

    expect(completion).toEqual({ text: EXPECTED_REPLY, finishReason: 'stop', usage: expectedUsage });
  });

  test('the provider receives the system message, the messages in order, the model, max tokens and temperature', async () => {
    await createModel().complete(createRequest());
    const [record] = contract.emulator().received;

    expect(record.provider).toBe(contract.wireFormat);
    expect(record.model).toBe(contract.model);
    expect(record.messages).toEqual(CONVERSATION);
    expect(contract.readMaxTokens(record.body)).toBe(100);
    expect(contract.readTemperature(record.body)).toBe(0.3);
    expect(record.stream).toBe(false);
  });

  test('stream yields the reply as text events, then one finish event with usage', async () => {
    const { text, events, error } = await collectStream(createModel().stream(createRequest()));

    expect(error).toBeUndefined();
    expect(text).toBe(EXPECTED_REPLY);
    expect(events.filter((event) => event.type === 'finish')).toEqual([
      { type: 'finish', finishReason: 'stop', usage: expectedUsage },
    ]);
    expect(events.at(-1)?.type).toBe('finish');
    expect(contract.emulator().received[0]).toMatchObject({ stream: true, messages: CONVERSATION });
  });

  test('a reply cut by max tokens finishes with length', async () => {
    const completion = await createModel().complete(createRequest({ maxTokens: 2 }));
    const { events } = await collectStream(createModel().stream(createRequest({ maxTokens: 2 })));

    expect(completion).toMatchObject({ text: 'Echo: And', finishReason: 'length' });
    expect(events.at(-1)).toMatchObject({ type: 'finish', finishReason: 'length' });
  });

  test('an upstream 500 is a retryable upstream_error (500), for complete and stream', async () => {
    contract.emulator().enqueue({ errorStatus: 500 });
    const completeError = await failComplete();
    contract.emulator().enqueue({ errorStatus: 500 });
    const streamError = expectAppError((await collectStream(createModel().stream(createRequest()))).error);

    for (const error of [completeError, streamError]) {
      expect(error).toMatchObject({ code: 'upstream_error', status: 500, isRetryable: true });
      expect(error.details).toMatchObject({ upstreamStatus: 500, reason: 'http_status' });
    }
  });

  test('an upstream 429 carries Retry-After as retryAfterSeconds', async () => {
    contract.emulator().enqueue({ errorStatus: 429, retryAfterSeconds: 7 });
    const error = await failComplete();

    expect(error).toMatchObject({ code: 'upstream_error', status: 500, isRetryable: true, retryAfterSeconds: 7 });
    expect(error.details).toMatchObject({ upstreamStatus: 429, reason: 'rate_limited' });
  });

  test('an upstream 400 is a non-retryable upstream_error that does not repeat the provider text', async () => {
    contract.emulator().enqueue({ errorStatus: 400, errorMessage: `Prompt too long: ${CONVERSATION[1].content}` });
    const error = await failComplete();

    expect(error).toMatchObject({ code: 'upstream_error', status: 500, isRetryable: false });
    expect(error.details).toMatchObject({ upstreamStatus: 400 });
    expectNoSecrets(error);
  });

  test('an upstream 401 says the credentials were rejected, without the key', async () => {
    contract.emulator().enqueue({ errorStatus: 401, errorMessage: `Incorrect API key provided: ${TEST_API_KEY}` });
    const error = await failComplete();

    expect(error.message).toMatch(/rejected the credentials/);
    expect(error).toMatchObject({ code: 'upstream_error', isRetryable: false });
    expect(error.details).toMatchObject({ upstreamStatus: 401, reason: 'credentials_rejected' });
    expectNoSecrets(error);
  });

  test('a stream cut mid-way throws a retryable upstream_error after the text delivered so far', async () => {
    contract.emulator().enqueue({ reply: 'one two three four five', cutAfterTokens: 2 });
    const { text, events, error } = await collectStream(createModel().stream(createRequest()));

    expect(text).toBe('one two');
    expect(events.some((event) => event.type === 'finish')).toBe(false);
    expect(expectAppError(error)).toMatchObject({ code: 'upstream_error', isRetryable: true, details: { reason: 'stream_cut' } });
  });

  test('a whole reply cut mid-body is a retryable upstream_error', async () => {
    contract.emulator().enqueue({ cutAfterTokens: 0 });

    expect(await failComplete()).toMatchObject({ code: 'upstream_error', isRetryable: true, details: { reason: 'stream_cut' } });
  });

  test('an error event inside the stream throws upstream_error after the text before it', async () => {
    contract.emulator().enqueue({ reply: 'one two three', streamErrorAfterTokens: 1, errorMessage: CONVERSATION[3].content });
    const { text, error } = await collectStream(createModel().stream(createRequest()));
    const appError = expectAppError(error);

    expect(text).toBe('one');
    expect(appError).toMatchObject({ code: 'upstream_error', details: { reason: 'stream_error' } });
    expectNoSecrets(appError);
  });

  test('a malformed stream is an upstream_error, and nothing is printed', async () => {
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const error = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      contract.emulator().enqueue({ reply: 'one two three four', malformed: true });
      const collected = await collectStream(createModel().stream(createRequest()));

      expect(expectAppError(collected.error)).toMatchObject({
        code: 'upstream_error',
        isRetryable: false,
        details: { reason: 'malformed_response' },
      });
      expect(warn).not.toHaveBeenCalled();
      expect(error).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
      error.mockRestore();
    }
  });

  test('a malformed whole reply is an upstream_error', async () => {
    contract.emulator().enqueue({ malformed: true });

    expect(await failComplete()).toMatchObject({ code: 'upstream_error', details: { reason: 'malformed_response' } });
  });

  test('no answer within the timeout is upstream_timeout (500), for complete and stream', async () => {
    contract.emulator().enqueue({ latencyMs: 2000 });
    const completeError = await failComplete({}, 100);
    contract.emulator().enqueue({ latencyMs: 2000 });
    const streamError = expectAppError((await collectStream(createModel(100).stream(createRequest()))).error);

    for (const error of [completeError, streamError]) {
      expect(error).toMatchObject({ code: 'upstream_timeout', status: 500, isRetryable: true });
    }
    await waitForRecord(contract.emulator(), (record) => record.outcome === 'aborted');
  });

  test('a stream that stalls times out; one that keeps going does not', async () => {
    contract.emulator().enqueue({ replyTokens: 6, tokensPerSecond: 25 });
    const steady = await collectStream(createModel(200).stream(createRequest()));
    contract.emulator().enqueue({ replyTokens: 6, tokensPerSecond: 2 });
    const stalled = await collectStream(createModel(200).stream(createRequest()));

    expect(steady.error).toBeUndefined();
    expect(steady.text.split(' ')).toHaveLength(6);
    expect(stalled.text).toBe('token1');
    expect(expectAppError(stalled.error)).toMatchObject({ code: 'upstream_timeout' });
  });

  test('time the consumer spends with an event does not count against the timeout', async () => {
    contract.emulator().enqueue({ reply: 'one two' });
    let text = '';
    for await (const event of createModel(100).stream(createRequest())) {
      if (event.type === 'text') {
        text += event.text;
        // A client slow to read, for longer than the timeout.
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }

    expect(text).toBe('one two');
  });

  test('aborting a hanging request rejects with an AbortError and cancels the upstream request', async () => {
    contract.emulator().enqueue({ hang: true });
    const controller = new AbortController();
    const completion = createModel().complete(createRequest({ signal: controller.signal })).catch((error: unknown) => error);
    await waitForRecord(contract.emulator(), (record) => record.outcome === 'pending');
    controller.abort();

    const error = await completion;
    expect(isAbortError(error)).toBe(true);
    expect(AppError.isInstance(error)).toBe(false);
    await waitForRecord(contract.emulator(), (record) => record.outcome === 'aborted');
  });

  test('aborting mid-stream throws an AbortError from the iterator and cancels the upstream request', async () => {
    contract.emulator().enqueue({ replyTokens: 50, tokensPerSecond: 50 });
    const controller = new AbortController();
    const { text, error } = await collectStream(createModel().stream(createRequest({ signal: controller.signal })), () =>
      controller.abort(),
    );

    expect(text).toBe('token1');
    expect(isAbortError(error)).toBe(true);
    const record = await waitForRecord(contract.emulator(), (candidate) => candidate.outcome !== 'pending');
    expect(record.outcome).toBe('aborted');
    expect(record.tokensSent).toBeLessThan(50);
  });

  test('an already aborted signal rejects without calling the provider', async () => {
    const controller = new AbortController();
    controller.abort();

    expect(isAbortError(await createModel().complete(createRequest({ signal: controller.signal })).catch((error: unknown) => error))).toBe(true);
    expect(isAbortError((await collectStream(createModel().stream(createRequest({ signal: controller.signal })))).error)).toBe(true);
    expect(contract.emulator().received).toHaveLength(0);
  });

  test('breaking out of the stream cancels the upstream request', async () => {
    contract.emulator().enqueue({ replyTokens: 50, tokensPerSecond: 50 });
    for await (const event of createModel().stream(createRequest())) {
      if (event.type === 'text') {
        break;
      }
    }

    const record = await waitForRecord(contract.emulator(), (candidate) => candidate.outcome !== 'pending');
    expect(record.outcome).toBe('aborted');
  });

  test('a provider that cannot be reached is a retryable upstream_error', async () => {
    const closedPort = await findClosedPort();
    const model = contract.createModel({ baseUrl: `http://127.0.0.1:${closedPort}`, apiKey: TEST_API_KEY, timeoutMs: 5000 });
    const error = expectAppError(await model.complete(createRequest()).catch((caught: unknown) => caught));

    expect(error).toMatchObject({ code: 'upstream_error', isRetryable: true, details: { reason: 'connection' } });
  });
}

async function findClosedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') {
    throw new Error('no port');
  }
  return address.port;
}
