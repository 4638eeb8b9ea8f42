import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express, { type Express } from 'express';
import type { Communication, Extension } from '@medplum/fhirtypes';
import { createTestTelemetry } from '../../test/support/telemetry.ts';
import { sseEvents } from '../../test/support/sse-events.ts';
import { AppError } from '../errors.ts';
import type { HostLogger } from '../host.ts';
import { createAbortError } from '../llm/provider-errors.ts';
import type { ChatModelRequest, ChatStreamEvent } from '../llm/chat-model.ts';
import { createRequestTelemetry } from '../telemetry/request-telemetry.ts';
import type { ChatTurn } from './chat-turn.ts';
import { deliveryTurnFields } from '../../test/support/delivery-turn.ts';
import { deliverStream } from './deliver-stream.ts';
import { EXTENSION } from './fhir-vocabulary.ts';
import { InFlightTurns } from './in-flight-turns.ts';

const MESSAGES = [{ role: 'user' as const, content: 'Latest glucose?' }];

/** The provider's side of one call: the test hands it events as a provider would send them; cancelled, it throws. */
class ProviderCall {
  readonly #queue: ({ readonly event: ChatStreamEvent } | { readonly error: unknown } | { readonly end: true })[] = [];
  #wake: (() => void) | undefined;
  /** True once the delivery asked for the call (its first `next()`). */
  started = false;

  send(...events: ChatStreamEvent[]): void {
    this.#queue.push(...events.map((event) => ({ event })));
    this.#wake?.();
  }

  fail(error: unknown): void {
    this.#queue.push({ error });
    this.#wake?.();
  }

  end(): void {
    this.#queue.push({ end: true });
    this.#wake?.();
  }

  async *events(signal: AbortSignal): AsyncGenerator<ChatStreamEvent> {
    this.started = true;
    for (;;) {
      while (this.#queue.length === 0 && !signal.aborted) {
        await new Promise<void>((resolve) => {
          const wake = (): void => {
            signal.removeEventListener('abort', wake);
            resolve();
          };
          this.#wake = wake;
          signal.addEventListener('abort', wake);
        });
      }
      // A cancelled call fails as the provider SDKs' do, whatever it had still to send.
      if (signal.aborted) {
        throw createAbortError(signal);
      }
      const item = this.#queue.shift();
      if (!item || 'end' in item) {
        return;
      }
      if ('error' in item) {
        throw item.error;
      }
      yield item.event;
    }
  }
}

/**
 * A reply journal that writes what waits in one batch, when told (`writeBatch`: the end of a turn of the event loop,
 * for the real one) or at once when a writer asks (`writeWaiting`).
 */
class JournalBatch {
  #waitingText = '';
  readonly #afterWrite: (() => void)[] = [];
  /** How often a writer had the waiting text written at once rather than with the batch. */
  writtenAtOnce = 0;

  delivered(text: string): void {
    this.#waitingText += text;
  }

  whenWritten(then: () => void): boolean {
    if (this.#waitingText === '') {
      return false;
    }
    this.#afterWrite.push(then);
    return true;
  }

  writeWaiting(): void {
    this.writtenAtOnce++;
    this.writeBatch();
  }

  writeBatch(): void {
    this.#waitingText = '';
    for (const then of this.#afterWrite.splice(0)) {
      then();
    }
  }
}

interface Watched {
  readonly turn: ChatTurn;
  readonly call: ProviderCall;
  /** Each reply recorded. */
  readonly recorded: Communication[];
  /** The reply text the journal was told went to the client (what a restart would record as delivered). */
  readonly journaled: string[];
}

/** A streamed turn whose provider call is `call`; `record` may stand in for the store's write of the reply. */
function streamedTurn(overrides: Partial<ChatTurn> = {}, record?: (resource: Communication) => Promise<void>, journal?: JournalBatch): Watched {
  const call = new ProviderCall();
  const recorded: Communication[] = [];
  const journaled: string[] = [];
  const turn = {
    projectId: 'project-1',
    records: {
      record: async (_projectId: string, resource: Communication) => {
        await record?.(resource);
        recorded.push(resource);
        return 'stored';
      },
      delivered: (_replyId: string, text: string) => {
        journaled.push(text);
        journal?.delivered(text);
      },
      // Without a journal to wait for, frames go out as they are sent.
      whenWritten: (then: () => void) => journal?.whenWritten(then) ?? false,
      writeWaiting: () => journal?.writeWaiting(),
    },
    chat: { messages: MESSAGES, stream: true, includeUsage: false },
    target: {
      id: 'openai/gpt-4o',
      model: {
        provider: 'test',
        complete: () => Promise.reject(new Error('not asked whole')),
        stream: (modelRequest: ChatModelRequest) => call.events(modelRequest.signal),
      },
    },
    ...deliveryTurnFields(MESSAGES),
    ...overrides,
  } as unknown as ChatTurn;
  return { turn, call, recorded, journaled };
}

/** A client of the stream: what it read so far, whether the stream ended, and a way to leave. */
interface StreamClient {
  status: number | undefined;
  body: string;
  ended: boolean;
  leave(): void;
}

interface Served {
  readonly client: StreamClient;
  /** The request's log lines (the host's logger). */
  readonly logged: Record<string, unknown>[];
  /** The server's side of the response. */
  readonly response: () => express.Response | undefined;
  /** What `deliverStream` threw, if it threw. */
  readonly thrown: () => unknown;
}

const servers: http.Server[] = [];

afterEach(() => {
  for (const server of servers.splice(0)) {
    server.close();
    server.closeAllConnections();
  }
});

/** Serves the turn's route on loopback, with the request log, and sends it one request. */
async function streamOf(watched: Watched): Promise<Served> {
  const logged: Record<string, unknown>[] = [];
  const logger: HostLogger = { debug: () => undefined, info: (_message, data) => void logged.push(data ?? {}), warn: () => undefined, error: () => undefined };
  let current: express.Response | undefined;
  let thrown: unknown;
  const app: Express = express();
  app.use(createRequestTelemetry(createTestTelemetry().telemetry, logger, undefined));
  app.post('/v1/chat/completions', async (_incoming, response) => {
    current = response;
    try {
      await deliverStream(watched.turn, response);
    } catch (error) {
      thrown = error;
      if (response.headersSent) {
        response.end();
        return;
      }
      const failure = error as AppError;
      response.status(failure.code === 'unavailable' ? 503 : 502).json({ error: { code: failure.code, message: failure.message } });
    }
  });
  const server = http.createServer(app).listen(0, '127.0.0.1');
  servers.push(server);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const outgoing = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions' });
  const client: StreamClient = { status: undefined, body: '', ended: false, leave: () => outgoing.destroy() };
  outgoing.on('error', () => undefined);
  outgoing.on('response', (incoming) => {
    client.status = incoming.statusCode;
    incoming.setEncoding('utf8');
    incoming.on('data', (text: string) => (client.body += text));
    incoming.on('end', () => (client.ended = true));
    incoming.on('error', () => undefined);
  });
  outgoing.end();
  return { client, logged, response: () => current, thrown: () => thrown };
}

/** A call's fragment in a chunk's delta. */
interface WireFragment {
  readonly id?: string;
  readonly function: { readonly name?: string; readonly arguments: string };
}

/** A chunk as a raw SSE reader parses it: a completion chunk, the usage chunk, or an in-band error. */
interface WireChunk {
  readonly choices?: readonly { readonly delta: { readonly content?: string | null; readonly tool_calls?: readonly WireFragment[] }; readonly finish_reason: string | null }[];
  readonly communication_id?: string;
  readonly usage?: unknown;
  readonly error?: unknown;
}

/** The JSON chunks of the whole events the client read (`[DONE]` left out). */
function chunksOf(client: StreamClient): WireChunk[] {
  return sseEvents<WireChunk>(client.body.slice(0, client.body.lastIndexOf('\n\n') + 2)).map((event) => event.data);
}

function textOf(client: StreamClient): string {
  return chunksOf(client)
    .map((chunk) => chunk.choices?.[0]?.delta.content ?? '')
    .join('');
}

function usageOf(resource: Communication | undefined): Extension[] | undefined {
  return resource?.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension;
}

function callsOf(resource: Communication | undefined): Extension[][] {
  return (resource?.extension ?? []).filter((extension) => extension.url === EXTENSION.toolCall).map((extension) => extension.extension ?? []);
}

const CLIENT_LEFT = { status: 'stopped', statusReason: { text: 'The client closed the stream.' } };

describe('deliverStream (steps 4–6, a streamed answer)', () => {
  test("a whole reply: the chunks, the provider's finish reason, the usage asked for, [DONE]; the reply completed with the text sent", async () => {
    const watched = streamedTurn({ chat: { messages: MESSAGES, stream: true, includeUsage: true } as unknown as ChatTurn['chat'] });
    watched.call.send({ type: 'text', text: 'Glucose ' }, { type: 'text', text: 'is 105' }, { type: 'finish', finishReason: 'length', usage: { promptTokens: 12, completionTokens: 7 } });
    watched.call.end();
    const { client } = await streamOf(watched);
    await waitFor(() => client.ended);

    const chunks = chunksOf(client);
    expect(client.status).toBe(200);
    expect(chunks[0]?.choices?.[0]?.delta).toEqual({ role: 'assistant', content: '', refusal: null });
    expect(textOf(client)).toBe('Glucose is 105');
    expect(chunks.at(-2)?.choices?.[0]).toMatchObject({ delta: {}, finish_reason: 'length' });
    expect(chunks.at(-2)?.communication_id).toBe('reply-1');
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 } });
    expect(client.body.endsWith('data: [DONE]\n\n')).toBe(true);

    expect(watched.recorded).toHaveLength(1);
    expect(watched.recorded[0]).toMatchObject({ id: 'reply-1', status: 'completed', payload: [{ contentString: 'Glucose is 105' }] });
    expect(watched.recorded[0]?.extension?.find((extension) => extension.url === EXTENSION.finishReason)?.valueCode).toBe('length');
    expect(watched.journaled.join('')).toBe('Glucose is 105');
  });

  test("the first token goes out at once, its journal line written then; the rest of a burst waits for the journal's batch", async () => {
    const journal = new JournalBatch();
    const watched = streamedTurn({}, undefined, journal);
    const { client } = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'First ' }, { type: 'text', text: 'second ' }, { type: 'text', text: 'third' });
    await waitFor(() => textOf(client) !== '');

    expect(textOf(client)).toBe('First ');
    // The journal's batch has not been written: the rest of the burst is held for it, never sent ahead of it.
    expect(journal.writtenAtOnce).toBe(1);
    expect(watched.journaled.join('')).toBe('First second third');
    journal.writeBatch();
    await waitFor(() => textOf(client) === 'First second third');
    watched.call.send({ type: 'finish', finishReason: 'stop', usage: undefined });
    watched.call.end();
    await waitFor(() => client.ended);

    expect(journal.writtenAtOnce).toBe(1);
    expect(watched.recorded[0]).toMatchObject({ status: 'completed', payload: [{ contentString: 'First second third' }] });
    expect(client.body.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  test("calls: the first opens the stream, each call's id goes out once, and the reply records the calls put together", async () => {
    const watched = streamedTurn();
    watched.call.send(
      { type: 'tool_call', index: 0, id: 'call_1', name: 'get_weather', arguments: '' },
      { type: 'tool_call', index: 0, arguments: '{"city":' },
      { type: 'tool_call', index: 0, arguments: '"Lyon"}' },
      // An OpenAI-compatible server's numbering, with a gap: the calls are recorded in order all the same.
      { type: 'tool_call', index: 2, id: 'call_2', name: 'get_time', arguments: '{}' },
      { type: 'finish', finishReason: 'tool_calls', usage: undefined }
    );
    watched.call.end();
    const { client } = await streamOf(watched);
    await waitFor(() => client.ended);

    const chunks = chunksOf(client);
    expect(chunks[0]?.choices?.[0]?.delta).toMatchObject({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: 'call_1', function: { name: 'get_weather' } }] });
    const fragments = chunks.flatMap((chunk) => chunk.choices?.[0]?.delta.tool_calls ?? []);
    expect(fragments.filter((fragment) => fragment.id !== undefined).map((fragment) => fragment.id)).toEqual(['call_1', 'call_2']);
    expect(fragments.map((fragment) => fragment.function.arguments).join('')).toBe('{"city":"Lyon"}{}');
    expect(chunks.at(-1)?.choices?.[0]?.finish_reason).toBe('tool_calls');
    expect(client.body.endsWith('data: [DONE]\n\n')).toBe(true);

    expect(watched.recorded[0]?.status).toBe('completed');
    expect(callsOf(watched.recorded[0])).toEqual([
      [
        { url: 'id', valueString: 'call_1' },
        { url: 'name', valueString: 'get_weather' },
        { url: 'arguments', valueString: '{"city":"Lyon"}' },
      ],
      [
        { url: 'id', valueString: 'call_2' },
        { url: 'name', valueString: 'get_time' },
        { url: 'arguments', valueString: '{}' },
      ],
    ]);
    expect(watched.recorded[0]?.extension?.find((extension) => extension.url === EXTENSION.finishReason)?.valueCode).toBe('tool_calls');
  });

  test('a call whose id and name come after its first fragment is recorded with them', async () => {
    const watched = streamedTurn();
    watched.call.send(
      { type: 'tool_call', index: 0, arguments: '{"code":' },
      { type: 'tool_call', index: 0, id: 'call_9', name: 'search_observations', arguments: '"2339-0"}' },
      { type: 'finish', finishReason: 'tool_calls', usage: undefined }
    );
    watched.call.end();
    const { client } = await streamOf(watched);
    await waitFor(() => client.ended);

    expect(callsOf(watched.recorded[0])).toEqual([
      [
        { url: 'id', valueString: 'call_9' },
        { url: 'name', valueString: 'search_observations' },
        { url: 'arguments', valueString: '{"code":"2339-0"}' },
      ],
    ]);
  });

  test("a client that leaves mid-stream: stopped with the text it was sent, charged the provider's usage while the call ran on, and nothing more journaled", async () => {
    const watched = streamedTurn({ usageWaitMs: 300 });
    const { client, response } = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'One ' }, { type: 'text', text: 'two ' });
    await waitFor(() => textOf(client) === 'One two ');
    client.leave();
    await waitFor(() => response()?.destroyed === true);

    // The call runs on, unseen: it is not cancelled when the client leaves, and ends with its own usage.
    expect(watched.turn.controller.signal.aborted).toBe(false);
    watched.call.send({ type: 'text', text: 'three ' }, { type: 'finish', finishReason: 'stop', usage: { promptTokens: 12, completionTokens: 9 } });
    watched.call.end();
    await waitFor(() => watched.recorded.length === 1);

    const reply = watched.recorded[0];
    expect(reply).toMatchObject({ ...CLIENT_LEFT, payload: [{ contentString: 'One two ' }] });
    expect(usageOf(reply)?.slice(0, 2)).toEqual([
      { url: 'prompt-tokens', valueInteger: 12 },
      { url: 'completion-tokens', valueInteger: 9 },
    ]);
    // What a restart would record as delivered is what the client was sent, not the text generated after it left.
    expect(watched.journaled.join('')).toBe('One two ');
    // The turn is over: the deadline for the call it let run on is cleared, not left to fire.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(watched.turn.controller.signal.aborted).toBe(false);
  });

  test('a client that leaves with no wait for usage: the call is cancelled at once, the reply stopped and charged an estimate', async () => {
    const watched = streamedTurn({ usageWaitMs: 0 });
    const { client } = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'Some words ' });
    await waitFor(() => textOf(client) === 'Some words ');
    client.leave();
    await waitFor(() => watched.recorded.length === 1);

    expect(watched.turn.controller.signal.aborted).toBe(true);
    expect(watched.recorded[0]).toMatchObject({ ...CLIENT_LEFT, payload: [{ contentString: 'Some words ' }] });
    expect(usageOf(watched.recorded[0])?.find((part) => part.url === 'estimated')?.valueBoolean).toBe(true);
  });

  test("an abort the turn did not ask for (the provider's own) mid-stream, the client still there: a provider failure, told in-band, not-done with the text sent", async () => {
    const watched = streamedTurn();
    const { client } = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'Partly ' });
    await waitFor(() => textOf(client) === 'Partly ');
    watched.call.fail(new DOMException('The operation was aborted.', 'AbortError'));
    await waitFor(() => client.ended && watched.recorded.length === 1);

    expect(chunksOf(client).at(-1)).toMatchObject({ error: { code: 'upstream_error', message: expect.stringMatching(/^The call to the LLM provider '.+' failed\.$/) } });
    expect(client.body).not.toContain('[DONE]');
    expect(watched.recorded[0]).toMatchObject({ status: 'not-done', payload: [{ contentString: 'Partly ' }] });
    expect(watched.turn.controller.signal.aborted).toBe(false);
  });

  test('a client gone before its departure was seen (a busy host): the reply is stopped, not completed', async () => {
    const watched = streamedTurn();
    const { client } = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'All of it' });
    await waitFor(() => textOf(client) === 'All of it');
    // The connection is gone now; the server reads its close only once the stream's last event is handled.
    client.leave();
    watched.call.send({ type: 'finish', finishReason: 'stop', usage: { promptTokens: 5, completionTokens: 3 } });
    watched.call.end();
    await waitFor(() => watched.recorded.length === 1);

    expect(watched.recorded[0]).toMatchObject({ ...CLIENT_LEFT, payload: [{ contentString: 'All of it' }] });
  });

  test('a client that leaves while its completed reply is recorded: the reply stays completed, the finished call is not cancelled after', async () => {
    let served: Served | undefined;
    const watched = streamedTurn({}, async (resource) => {
      if (resource.status === 'completed') {
        served?.client.leave();
        await waitFor(() => served?.response()?.destroyed === true);
      }
    });
    served = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'Done.' }, { type: 'finish', finishReason: 'stop', usage: undefined });
    watched.call.end();
    await waitFor(() => watched.recorded.length === 1);

    expect(watched.recorded[0]).toMatchObject({ status: 'completed', payload: [{ contentString: 'Done.' }] });
    expect(watched.turn.controller.signal.aborted).toBe(false);
  });

  test("a provider failure after the first token: an in-band error and the end, no [DONE]; not-done with the text sent; the error's code on the log line", async () => {
    const watched = streamedTurn();
    const { client, logged } = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'Half an ' });
    await waitFor(() => textOf(client) === 'Half an ');
    watched.call.fail(new AppError('upstream_error', 'The model provider failed.', { isRetryable: true }));
    await waitFor(() => client.ended && logged.length === 1);

    expect(chunksOf(client).at(-1)).toEqual({ error: { message: 'The model provider failed.', type: 'api_error', code: 'upstream_error', param: null } });
    expect(client.body).not.toContain('[DONE]');
    expect(watched.recorded[0]).toMatchObject({ status: 'not-done', payload: [{ contentString: 'Half an ' }] });
    expect(logged[0]).toMatchObject({ status: 200, code: 'upstream_error' });
  });

  test('a completed reply that cannot be recorded: its client gets an in-band error, not [DONE]', async () => {
    const watched = streamedTurn({}, async () => {
      throw new Error('the journal cannot be written');
    });
    const served = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'Answer.' }, { type: 'finish', finishReason: 'stop', usage: undefined });
    watched.call.end();
    await waitFor(() => served.client.ended);

    expect(chunksOf(served.client).at(-1)).toMatchObject({ error: { code: 'internal_error' } });
    expect(served.client.body).not.toContain('[DONE]');
    expect((served.thrown() as Error).message).toBe('the journal cannot be written');
  });

  test('a turn the server stops while shutting down, mid-stream: stopped with the text sent and why; its client told in-band', async () => {
    const turns = new InFlightTurns();
    const watched = streamedTurn({ controller: turns.begin() });
    const { client, logged } = await streamOf(watched);
    watched.call.send({ type: 'text', text: 'Before the ' });
    await waitFor(() => textOf(client) === 'Before the ');
    void turns.drain(0);
    await waitFor(() => watched.recorded.length === 1);

    expect(watched.recorded[0]).toMatchObject({ status: 'stopped', statusReason: { text: 'The server shut down before the reply finished.' }, payload: [{ contentString: 'Before the ' }] });
    await waitFor(() => client.ended && logged.length === 1);
    expect(chunksOf(client).at(-1)).toMatchObject({ error: { code: 'unavailable', message: 'The server is shutting down; retry on another instance.' } });
    expect(client.body).not.toContain('[DONE]');
    expect(logged[0]).toMatchObject({ status: 200, code: 'unavailable' });
  });

  test('a turn the server stops while shutting down, before the first token: a 503, the reply stopped with no text', async () => {
    const turns = new InFlightTurns();
    const watched = streamedTurn({ controller: turns.begin() });
    const { client } = await streamOf(watched);
    await waitFor(() => watched.call.started);
    void turns.drain(0);
    await waitFor(() => client.ended);

    expect(client.status).toBe(503);
    expect(JSON.parse(client.body)).toEqual({ error: { code: 'unavailable', message: 'The server is shutting down; retry on another instance.' } });
    expect(watched.recorded[0]).toMatchObject({ status: 'stopped', statusReason: { text: 'The server shut down before the reply finished.' } });
    expect(watched.recorded[0]?.payload).toBeUndefined();
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let tries = 0; !condition(); tries++) {
    if (tries > 500) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
