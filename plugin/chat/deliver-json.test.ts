import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express } from 'express';
import request from 'supertest';
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { estimateTokensOfLength } from '../governance/usage-estimate.ts';
import type { ChatCompletion, ChatModelRequest } from '../llm/chat-model.ts';
import { RepositoryOperations } from '../telemetry/repository-operations.ts';
import type { ChatTurn } from './chat-turn.ts';
import { deliveryTurnFields } from '../../test/support/delivery-turn.ts';
import { deliverJson } from './deliver-json.ts';
import { ERROR_CODE_SYSTEM, EXTENSION } from './fhir-vocabulary.ts';
import { InFlightTurns } from './in-flight-turns.ts';

const MESSAGES = [{ role: 'user' as const, content: 'Latest glucose?' }];

interface Watched {
  readonly turn: ChatTurn;
  /** Each reply recorded, and whether its client had been answered by then. */
  readonly recorded: { resource: Communication; answeredBefore: boolean }[];
  readonly asked: ChatModelRequest[];
}

/** A turn whose model answers with `complete`, its records watched. */
function turnWith(complete: (request: ChatModelRequest) => Promise<ChatCompletion>, overrides: Partial<ChatTurn> = {}, answered: () => boolean = () => false): Watched {
  const recorded: Watched['recorded'] = [];
  const asked: ChatModelRequest[] = [];
  const turn = {
    projectId: 'project-1',
    records: { record: async (_projectId: string, resource: Communication) => void recorded.push({ resource, answeredBefore: answered() }) },
    chat: { messages: MESSAGES, includeUsage: false },
    target: {
      id: 'openai/gpt-4o',
      model: {
        provider: 'test',
        complete: (modelRequest: ChatModelRequest) => {
          asked.push(modelRequest);
          return complete(modelRequest);
        },
        stream: () => {
          throw new Error('not streamed');
        },
      },
    },
    ...deliveryTurnFields(MESSAGES),
    ...overrides,
  } as unknown as ChatTurn;
  return { turn, recorded, asked };
}

/** The route, its errors rendered with their code. */
function appFor(turn: () => ChatTurn, answer?: Parameters<typeof deliverJson>[2]): { app: Express; answered: () => boolean } {
  let current: express.Response | undefined;
  const app = express();
  app.post('/v1/chat/completions', async (_incoming, response) => {
    current = response;
    try {
      await deliverJson(turn(), response, answer);
    } catch (error) {
      const failure = error as AppError;
      response.status(failure.code === 'unavailable' ? 503 : 502).json({ error: { code: failure.code, message: failure.message } });
    }
  });
  // Answered: the status line and headers are out (a body follows them at once).
  return { app, answered: () => current?.headersSent ?? false };
}

const ANSWER: ChatCompletion = { text: 'Glucose is 105 mg/dL.', finishReason: 'stop', usage: { promptTokens: 12, completionTokens: 7 } };

describe('deliverJson (steps 4–6, a JSON answer)', () => {
  test("a completed reply is on record before its answer is sent; the answer names the conversation and the reply's record", async () => {
    let answered = () => false;
    const watched = turnWith(async () => ANSWER, {}, () => answered());
    const built = appFor(() => watched.turn);
    answered = built.answered;
    const response = await request(built.app).post('/v1/chat/completions').expect(200);

    expect(watched.recorded).toHaveLength(1);
    expect(watched.recorded[0]?.answeredBefore).toBe(false);
    expect(watched.recorded[0]?.resource).toMatchObject({ id: 'reply-1', status: 'completed', payload: [{ contentString: 'Glucose is 105 mg/dL.' }] });
    expect(response.headers['x-conversation-id']).toBe('root-1');
    expect(response.headers['x-fhirgate-repository-operations']).toBeUndefined();
    expect(response.body).toMatchObject({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1_700_000_000,
      model: 'openai/gpt-4o',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Glucose is 105 mg/dL.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
      conversation_id: 'root-1',
      communication_id: 'reply-1',
    });
    // The model got the turn's request, with the turn's signal.
    expect(watched.asked).toEqual([{ ...watched.turn.modelRequest, signal: watched.turn.controller.signal }]);
  });

  test("the model's calls for the client and why it stopped are on record", async () => {
    const toolCalls = [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }];
    const watched = turnWith(async () => ({ text: '', toolCalls, finishReason: 'tool_calls', usage: undefined }));
    const response = await request(appFor(() => watched.turn).app).post('/v1/chat/completions').expect(200);
    const resource = watched.recorded[0]?.resource;
    expect(resource?.extension?.find((extension) => extension.url === EXTENSION.toolCall)?.extension?.[0]).toEqual({ url: 'id', valueString: 'call_1' });
    expect(resource?.extension?.find((extension) => extension.url === EXTENSION.finishReason)?.valueCode).toBe('tool_calls');
    expect(response.body.choices[0].message.tool_calls).toEqual([{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
  });

  test('the repository operations, when the turn reports them, in their header', async () => {
    const operations = new RepositoryOperations();
    operations.reads = 2;
    operations.searches = 1;
    operations.writes = 2;
    const watched = turnWith(async () => ANSWER, { reportedOperations: operations });
    const response = await request(appFor(() => watched.turn).app).post('/v1/chat/completions').expect(200);
    expect(response.headers['x-fhirgate-repository-operations']).toBe('reads=2; searches=1; writes=2');
  });

  test('another wire format writes the body (the Responses API); the record is the same', async () => {
    const watched = turnWith(async () => ANSWER);
    const response = await request(appFor(() => watched.turn, (turn, completion) => ({ object: 'response', id: turn.replyId, text: completion.text })).app)
      .post('/v1/chat/completions')
      .expect(200);
    expect(response.body).toEqual({ object: 'response', id: 'reply-1', text: 'Glucose is 105 mg/dL.' });
    expect(watched.recorded[0]?.resource.status).toBe('completed');
  });

  test('a provider failure: the reply on record not-done with the error, and the error, final, to the client', async () => {
    const watched = turnWith(async () => {
      throw new AppError('upstream_error', 'The model provider is unavailable.', { isRetryable: true });
    });
    const response = await request(appFor(() => watched.turn).app).post('/v1/chat/completions').expect(502);
    expect(response.body.error).toEqual({ code: 'upstream_error', message: 'The model provider is unavailable.' });
    expect(watched.recorded).toHaveLength(1);
    expect(watched.recorded[0]?.resource.status).toBe('not-done');
    // Nothing was delivered: no text on record.
    expect(watched.recorded[0]?.resource.payload).toBeUndefined();
    expect(watched.recorded[0]?.resource.statusReason).toEqual({ coding: [{ system: ERROR_CODE_SYSTEM, code: 'upstream_error' }], text: 'The model provider is unavailable.' });
  });

  test('a turn the server stops while shutting down: stopped on record, 503 to its client', async () => {
    const turns = new InFlightTurns();
    const controller = turns.begin();
    const watched = turnWith(
      (modelRequest) =>
        new Promise((_resolve, reject) => {
          modelRequest.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' })));
          void turns.drain(0);
        }),
      { controller }
    );
    const response = await request(appFor(() => watched.turn).app).post('/v1/chat/completions').expect(503);
    expect(response.body.error).toEqual({ code: 'unavailable', message: 'The server is shutting down; retry on another instance.' });
    expect(watched.recorded[0]?.resource).toMatchObject({ status: 'stopped', statusReason: { text: 'The server shut down before the reply.' } });
    expect(watched.recorded[0]?.resource.payload).toBeUndefined();
  });

  test('a call aborted for the client: stopped on record, nothing thrown', async () => {
    const controller = new AbortController();
    const watched = turnWith(
      async () => {
        controller.abort();
        throw Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
      },
      { controller }
    );
    // Nothing is answered: the route ends without a body, as a client that left gets none.
    await withClient(appFor(() => watched.turn).app, async (leave) => {
      await waitFor(() => watched.recorded.length === 1);
      leave();
    });
    expect(watched.recorded[0]?.resource).toMatchObject({ status: 'stopped', statusReason: { text: 'The client closed the connection before the reply.' } });
    expect(watched.recorded[0]?.resource.payload).toBeUndefined();
  });

  test("an abort the turn did not ask for (the provider's own), the client still there: a provider failure, answered and on record not-done", async () => {
    const watched = turnWith(async () => {
      throw Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
    });
    const response = await request(appFor(() => watched.turn).app).post('/v1/chat/completions').expect(502);
    expect(response.body.error).toMatchObject({ code: 'upstream_error', message: expect.stringMatching(/^The call to the LLM provider '.+' failed\.$/) });
    expect(watched.recorded[0]?.resource).toMatchObject({ status: 'not-done', statusReason: { coding: [{ code: 'upstream_error' }], text: response.body.error.message } });
    expect(watched.turn.controller.signal.aborted).toBe(false);
  });

  test('a client that left, then a provider that fails: stopped (the client left first), not a failure', async () => {
    let fail: (error: Error) => void = () => undefined;
    const watched = turnWith(() => new Promise((_resolve, reject) => (fail = reject)), { usageWaitMs: 5_000 });
    await withClient(appFor(() => watched.turn).app, async (leave) => {
      await waitFor(() => watched.asked.length === 1);
      leave();
      await new Promise((resolve) => setTimeout(resolve, 50));
      fail(new AppError('upstream_error', 'The model provider failed.'));
      await waitFor(() => watched.recorded.length === 1);
    });
    expect(watched.recorded[0]?.resource).toMatchObject({ status: 'stopped', statusReason: { text: 'The client closed the connection before the reply.' } });
  });

  test('a client gone before its departure was seen (a busy host): the reply is stopped, not completed', async () => {
    let current: (() => void) | undefined;
    const watched = turnWith(async () => {
      // The connection is gone now; its close event has not been read yet.
      current?.();
      return ANSWER;
    });
    const built = appFor(() => watched.turn);
    await withClient(built.app, async (leave) => {
      current = leave;
      await waitFor(() => watched.recorded.length === 1);
    });
    expect(watched.recorded[0]?.resource.status).toBe('stopped');
  });

  test('a client that leaves while the call runs on: the reply stopped, charged what the provider reported, nothing sent', async () => {
    let release: (completion: ChatCompletion) => void = () => undefined;
    const watched = turnWith(() => new Promise((resolve) => (release = resolve)), { usageWaitMs: 300 });
    const built = appFor(() => watched.turn);
    await withClient(built.app, async (leave) => {
      await waitFor(() => watched.asked.length === 1);
      leave();
      // The call runs on (usageWaitMs): it is not cancelled when the client leaves.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(watched.turn.controller.signal.aborted).toBe(false);
      release({ text: 'Glucose is 105.', toolCalls: [{ id: 'c', name: 'f', arguments: '{}' }], finishReason: 'stop', usage: { promptTokens: 12, completionTokens: 9 } });
      await waitFor(() => watched.recorded.length === 1);
    });
    const resource = watched.recorded[0]?.resource;
    expect(resource).toMatchObject({ status: 'stopped', statusReason: { text: 'The client closed the connection before the reply.' } });
    expect(resource?.payload).toBeUndefined();
    const usage = resource?.extension?.find((extension) => extension.url === EXTENSION.usage);
    expect(usage?.extension?.slice(0, 2)).toEqual([
      { url: 'prompt-tokens', valueInteger: 12 },
      { url: 'completion-tokens', valueInteger: 9 },
    ]);
    expect(built.answered()).toBe(false);
    // The turn is over: the deadline for the call it let run on is cleared, not left to fire.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(watched.turn.controller.signal.aborted).toBe(false);
  });

  test('a client that leaves and a provider that reports no usage: the estimate counts the text and calls generated', async () => {
    /** The usage recorded when the client leaves and the call then ends with `completion`. */
    const usageAfterLeaving = async (completion: ChatCompletion) => {
      let release: (completion: ChatCompletion) => void = () => undefined;
      const watched = turnWith(() => new Promise((resolve) => (release = resolve)), { usageWaitMs: 5_000 });
      await withClient(appFor(() => watched.turn).app, async (leave) => {
        await waitFor(() => watched.asked.length === 1);
        leave();
        await new Promise((resolve) => setTimeout(resolve, 50));
        release(completion);
        await waitFor(() => watched.recorded.length === 1);
      });
      return watched.recorded[0]?.resource.extension?.find((extension) => extension.url === EXTENSION.usage);
    };

    // 400 characters of text and 400 of a call: 800 generated.
    const usage = await usageAfterLeaving({ text: 'x'.repeat(400), toolCalls: [{ id: 'c', name: 'n'.repeat(100), arguments: 'a'.repeat(300) }], finishReason: 'stop', usage: undefined });
    expect(usage?.extension?.find((part) => part.url === 'estimated')?.valueBoolean).toBe(true);
    expect(usage?.extension?.find((part) => part.url === 'completion-tokens')?.valueInteger).toBe(estimateTokensOfLength(800));

    // Text alone: the text's characters.
    const textUsage = await usageAfterLeaving({ text: 'y'.repeat(400), finishReason: 'stop', usage: undefined });
    expect(textUsage?.extension?.find((part) => part.url === 'completion-tokens')?.valueInteger).toBe(estimateTokensOfLength(400));
  });
});

/** Serves `app` on loopback, sends it one request, and runs `scenario` with a way for that client to leave. */
async function withClient(app: Express, scenario: (leave: () => void) => Promise<void>): Promise<void> {
  const server = http.createServer(app).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const outgoing = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions' });
  outgoing.on('error', () => undefined);
  outgoing.end();
  try {
    await scenario(() => outgoing.destroy());
  } finally {
    outgoing.destroy();
    server.close();
    server.closeAllConnections();
  }
}

async function waitFor(condition: () => boolean): Promise<void> {
  for (let tries = 0; !condition(); tries++) {
    if (tries > 500) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
