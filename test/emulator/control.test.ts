import { afterEach, describe, expect, test } from '@jest/globals';
import OpenAI from 'openai';
import { BEHAVIOUR_HEADER, InvalidBehaviourError, REDACTED, startLlmEmulator } from './index.ts';
import type { EmulatorBehaviour, LlmEmulator, LlmEmulatorOptions, ReceivedRequest, RequestTotals } from './index.ts';

let emulator: LlmEmulator | undefined;

afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

async function start(options?: LlmEmulatorOptions): Promise<LlmEmulator> {
  emulator = await startLlmEmulator(options);
  return emulator;
}

async function askOpenAi(
  running: LlmEmulator,
  headers: Record<string, string> = {},
  content = 'hi',
): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${running.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content }] }),
  });
  return { status: response.status, body: await response.json() };
}

function replyOf(body: unknown): unknown {
  return (body as OpenAI.ChatCompletion).choices[0].message.content;
}

async function postControl(running: LlmEmulator, path: string, body?: unknown): Promise<Response> {
  return fetch(`${running.url}/_emulator/${path}`, {
    method: 'POST',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

describe('received requests', () => {
  test('records what the model was sent, with credentials redacted', async () => {
    const running = await start();
    const client = new OpenAI({ apiKey: 'sk-never-stored', baseURL: `${running.url}/v1`, maxRetries: 0 });
    await client.chat.completions.create(
      {
        model: 'gpt-test',
        messages: [
          { role: 'system', content: 'Be kind.' },
          { role: 'user', content: [{ type: 'text', text: 'first part' }, { type: 'text', text: 'second part' }] },
        ],
        temperature: 0.2,
      },
      { headers: { 'api-key': 'azure-never-stored', 'x-api-key': 'anthropic-never-stored', 'x-trace': 'abc' } },
    );

    const [record] = running.received;
    expect(record).toMatchObject({
      sequence: 1,
      provider: 'openai',
      path: '/v1/chat/completions',
      model: 'gpt-test',
      stream: false,
      messages: [
        { role: 'system', content: 'Be kind.' },
        { role: 'user', content: 'first part\nsecond part' },
      ],
      body: { model: 'gpt-test', temperature: 0.2 },
      outcome: 'completed',
      behaviour: {},
    });
    expect(record.headers).toMatchObject({
      authorization: REDACTED,
      'api-key': REDACTED,
      'x-api-key': REDACTED,
      'x-trace': 'abc',
    });
    expect(JSON.stringify(running.received)).not.toMatch(/never-stored/);
    expect(record.receivedAt).toBeLessThanOrEqual(Date.now());
  });

  test('keeps at most recordLimit records while the totals keep counting', async () => {
    const running = await start({ recordLimit: 2 });
    for (const content of ['one', 'two', 'three']) {
      await askOpenAi(running, {}, content);
    }

    expect(running.received.map((record) => record.messages[0].content)).toEqual(['two', 'three']);
    expect(running.totals).toEqual({ requests: 3, completed: 3, errored: 0, cut: 0, aborted: 0, tokensSent: 6 });
  });
});

describe('choosing the behaviour', () => {
  test('the header wins over the queue, which wins over the default', async () => {
    const running = await start({ behaviour: { reply: 'startup default' } });
    running.setBehaviour({ reply: 'new default' });
    running.enqueue({ reply: 'queued first' });
    running.enqueue({ reply: 'queued second' });

    const fromHeader = await askOpenAi(running, { [BEHAVIOUR_HEADER]: JSON.stringify({ reply: 'from header' }) });
    const replies = [replyOf(fromHeader.body)];
    for (let index = 0; index < 3; index++) {
      replies.push(replyOf((await askOpenAi(running)).body));
    }

    // The header request did not consume the queue.
    expect(replies).toEqual(['from header', 'queued first', 'queued second', 'new default']);
    expect(running.received[0].behaviour).toEqual({ reply: 'from header' });
  });

  test('an invalid header is answered 400 in the provider shape and not recorded', async () => {
    const running = await start();
    const typo = await askOpenAi(running, { [BEHAVIOUR_HEADER]: '{"latency": 5}' });
    const notJson = await askOpenAi(running, { [BEHAVIOUR_HEADER]: 'hang' });

    expect(typo).toEqual({
      status: 400,
      body: {
        error: {
          message: `Invalid ${BEHAVIOUR_HEADER} header: unknown behaviour field "latency"`,
          type: 'invalid_request_error',
          param: null,
          code: null,
        },
      },
    });
    expect(notJson.status).toBe(400);
    expect(running.received).toHaveLength(0);
  });

  test('in-process calls reject invalid behaviours', async () => {
    const running = await start();

    expect(() => running.setBehaviour({ errorStatus: 200 })).toThrow(InvalidBehaviourError);
    expect(() => running.enqueue({ reply: 'x', replyTokens: 3 })).toThrow('reply and replyTokens are exclusive');
    expect(() => running.setBehaviour({ latencyMS: 5 } as unknown as EmulatorBehaviour)).toThrow('unknown behaviour field');
  });

  test('reset forgets requests and queued behaviours and restores the startup behaviour', async () => {
    const running = await start({ behaviour: { reply: 'startup' } });
    const received = running.received;
    running.setBehaviour({ reply: 'changed' });
    running.enqueue({ reply: 'queued' });
    await askOpenAi(running);
    running.enqueue({ reply: 'queued again' });
    running.reset();
    const after = await askOpenAi(running);

    expect(replyOf(after.body)).toBe('startup');
    expect(received).toBe(running.received);
    expect(received.map((record) => record.sequence)).toEqual([1]);
    expect(running.totals.requests).toBe(1);
  });
});

describe('control endpoints (for another process)', () => {
  test('set the default, queue behaviours, list requests and reset', async () => {
    const running = await start();

    expect((await postControl(running, 'behaviour', { reply: 'remote default' })).status).toBe(200);
    const queued = await postControl(running, 'enqueue', [{ reply: 'remote one' }, { errorStatus: 500 }]);
    expect(await queued.json()).toEqual({ queued: 2 });
    const replies = [await askOpenAi(running), await askOpenAi(running), await askOpenAi(running)];
    expect(replies.map((reply) => reply.status)).toEqual([200, 500, 200]);
    expect(replies.map((reply) => (reply.status === 200 ? replyOf(reply.body) : null))).toEqual([
      'remote one',
      null,
      'remote default',
    ]);

    const listing = (await (await fetch(`${running.url}/_emulator/requests`)).json()) as {
      requests: ReceivedRequest[];
      totals: RequestTotals;
    };
    expect(listing.requests.map((record) => record.outcome)).toEqual(['completed', 'errored', 'completed']);
    expect(listing.totals).toMatchObject({ requests: 3, completed: 2, errored: 1 });

    expect((await postControl(running, 'reset')).status).toBe(200);
    expect(running.received).toHaveLength(0);
    expect(replyOf((await askOpenAi(running)).body)).toBe('Echo: hi');
  });

  test('reject invalid behaviours and unknown routes', async () => {
    const running = await start();
    const invalid = await postControl(running, 'behaviour', { tokensPerSecond: -1 });
    const notJson = await fetch(`${running.url}/_emulator/enqueue`, { method: 'POST', body: '{' });
    const unknown = await postControl(running, 'nothing');

    expect(invalid.status).toBe(400);
    expect(await invalid.json()).toEqual({ error: { message: 'tokensPerSecond must be a number >= 0' } });
    expect(notJson.status).toBe(400);
    expect(unknown.status).toBe(404);
  });
});
