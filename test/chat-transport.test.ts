/**
 * HTTP-level behaviour of `POST /v1/chat/completions`: body limits, malformed bodies, upstream timeouts and rate
 * limits, the `X-Conversation-ID` header, and back-pressure from a slow client to the provider. Requests go out
 * with `fetch` or `node:http` so the test sees the status, headers and raw SSE text a client gets.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { waitFor } from './support/wait-for.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';

const MODEL = 'openai/gpt-4o-mini';
/** The same emulator behind a provider that waits at most STRICT_TIMEOUT_MS for each answer or stream event. */
const STRICT_MODEL = 'strict/gpt-4o-mini';
const STRICT_TIMEOUT_MS = 300;
const MAX_BODY_BYTES = 64 * 1024;

/** The spec's error body. */
interface ErrorBody {
  error: { message: string; type: string; code: string };
}

/** One parsed SSE event: a JSON chunk, or the `[DONE]` marker. */
type SseEvent = Record<string, unknown> | '[DONE]';

describe('chat route over HTTP', () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let token: string;
  let medplum: MedplumClient;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    // One try per call: these tests look at what a single failure does (retries: test/provider-resilience.test.ts).
    const openai = { kind: 'openai' as const, apiKey: 'sk-test-provider-key', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } };
    host = await startTestHost({
      plugin: {
        maxBodyBytes: MAX_BODY_BYTES,
        llm: { providers: { openai, strict: { ...openai, timeoutMs: STRICT_TIMEOUT_MS } }, defaultModel: MODEL },
        // The back-pressure test asks for a 120,000-token reply.
        chatLimits: { maxTokens: 200_000 },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(async () => {
    emulator.reset();
    project = await host.seedProject();
    token = await host.accessTokenFor(project.ids['practitioner-membership']);
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  });

  function headers(): Record<string, string> {
    return { Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId, 'Content-Type': 'application/json' };
  }

  /** Posts a chat request; a string body is sent as it is. */
  async function postChat(body: string | Record<string, unknown>): Promise<Response> {
    return fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: headers(),
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  async function storedCommunications(): Promise<Communication[]> {
    return medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });
  }

  async function storedReply(): Promise<Communication> {
    const replies = (await storedCommunications()).filter((communication) => communication.category?.[0]?.coding?.[0]?.code === 'ai-response');
    expect(replies).toHaveLength(1);
    return replies[0];
  }

  /** Expects the spec's error body with this status and code, and returns it. */
  async function expectErrorResponse(response: Response, status: number, expected: { type: string; code: string }): Promise<ErrorBody> {
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await response.json()) as ErrorBody;
    expect(body).toEqual({ error: { message: expect.any(String), param: null, ...expected } });
    expect(body.error.message).not.toBe('');
    return body;
  }

  test('a body larger than maxBodyBytes is 413 with the error body; nothing is stored or sent upstream', async () => {
    const response = await postChat({ model: MODEL, messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY_BYTES + 1024) }] });

    await expectErrorResponse(response, 413, { type: 'invalid_request_error', code: 'payload_too_large' });
    expect(await storedCommunications()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test('a body just under maxBodyBytes is answered', async () => {
    const content = 'x'.repeat(MAX_BODY_BYTES - 200);
    const response = await postChat({ model: MODEL, messages: [{ role: 'user', content }] });

    expect(response.status).toBe(200);
    expect(((await response.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content).toBe(`Echo: ${content}`);
  });

  test('malformed JSON is 400 with the error body; nothing is stored or sent upstream', async () => {
    const response = await postChat('{"model": "openai/gpt-4o-mini", "messages": [');

    await expectErrorResponse(response, 400, { type: 'invalid_request_error', code: 'invalid_request' });
    expect(await storedCommunications()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test('a provider that never answers is 500 upstream_timeout after timeoutMs, and the reply is stored as not-done', async () => {
    emulator.enqueue({ hang: true });
    const startedAt = Date.now();
    const response = await postChat({ model: STRICT_MODEL, messages: [{ role: 'user', content: 'Are you there?' }] });
    const elapsedMs = Date.now() - startedAt;

    const body = await expectErrorResponse(response, 500, { type: 'api_error', code: 'upstream_timeout' });
    expect(body.error.message).toContain(`${STRICT_TIMEOUT_MS} ms`);
    expect(elapsedMs).toBeGreaterThanOrEqual(STRICT_TIMEOUT_MS);
    expect(elapsedMs).toBeLessThan(STRICT_TIMEOUT_MS + 2000);
    const reply = await storedReply();
    expect(reply.status).toBe('not-done');
    expect(reply.statusReason?.text).toBe(body.error.message);
    // No text arrived; FHIR has no empty strings, so the stored payload carries none.
    expect(reply.payload?.[0]?.contentString).toBeUndefined();
    // The gateway hung up on the provider instead of leaving the call open.
    await waitFor(async () => (emulator.received[0].outcome === 'aborted' ? true : undefined));
  });

  test('a stream that stalls after its first token ends with an in-band upstream_timeout event and no [DONE]', async () => {
    // The first token goes out at once, the second is due a second later: far beyond the 300 ms timeout.
    emulator.enqueue({ replyTokens: 5, tokensPerSecond: 1 });
    const response = await postChat({ model: STRICT_MODEL, stream: true, messages: [{ role: 'user', content: 'Talk slowly' }] });

    expect(response.status).toBe(200);
    const raw = await response.text();
    const events = parseSse(raw);
    expect(raw.endsWith('\n\n')).toBe(true);
    expect(events).not.toContain('[DONE]');
    expect(events.at(-1)).toEqual({ error: { message: expect.stringContaining(`${STRICT_TIMEOUT_MS} ms`), type: 'api_error', code: 'upstream_timeout', param: null } });
    const delivered = contentOf(events);
    expect(delivered).toBe('token1');
    const reply = await storedReply();
    expect(reply.status).toBe('not-done');
    expect(reply.statusReason?.text).toBe((events.at(-1) as unknown as ErrorBody).error.message);
    expect(reply.payload).toEqual([{ contentString: delivered }]);
    await waitFor(async () => (emulator.received[0].outcome === 'aborted' ? true : undefined));
  });

  test.each([false, true])(
    'an upstream 429 with Retry-After is a 500 upstream_error passing Retry-After on (stream: %s), and the reply is not-done',
    async (stream) => {
      emulator.enqueue({ errorStatus: 429, retryAfterSeconds: 7, errorMessage: 'Rate limit reached for gpt-4o-mini in organization org-secret' });
      const response = await postChat({ model: MODEL, stream, messages: [{ role: 'user', content: 'Hello' }] });

      const body = await expectErrorResponse(response, 500, { type: 'api_error', code: 'upstream_error' });
      expect(response.headers.get('retry-after')).toBe('7');
      expect(body.error.message).toBe("The LLM provider 'openai' is rate limiting requests (HTTP 429).");
      // Upstream text (which can name the organisation, or echo the prompt) never reaches the client.
      expect(JSON.stringify(body)).not.toContain('org-secret');
      expect(emulator.received).toHaveLength(1);
      const reply = await storedReply();
      expect(reply.status).toBe('not-done');
      expect(reply.statusReason?.text).toBe(body.error.message);
    },
  );

  test('X-Conversation-ID names the conversation on JSON and streamed responses, new and continued', async () => {
    const first = await postChat({ model: MODEL, messages: [{ role: 'user', content: 'First' }] });
    const firstBody = (await first.json()) as { conversation_id: string };
    expect(first.headers.get('x-conversation-id')).toBe(firstBody.conversation_id);
    const conversationId = firstBody.conversation_id;

    const newStream = await postChat({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Another topic' }] });
    const newStreamChunks = parseSse(await newStream.text()).filter((event) => event !== '[DONE]');
    const newStreamId = newStreamChunks[0].conversation_id;
    expect(newStream.headers.get('x-conversation-id')).toBe(newStreamId);
    expect(newStreamId).not.toBe(conversationId);
    expect(newStreamChunks.every((chunk) => chunk.conversation_id === newStreamId)).toBe(true);

    const continuedJson = await postChat({ model: MODEL, conversation_id: conversationId, messages: [{ role: 'user', content: 'Second' }] });
    expect(continuedJson.headers.get('x-conversation-id')).toBe(conversationId);
    expect(((await continuedJson.json()) as { conversation_id: string }).conversation_id).toBe(conversationId);

    const continuedStream = await postChat({ model: MODEL, stream: true, conversation_id: conversationId, messages: [{ role: 'user', content: 'Third' }] });
    expect(continuedStream.headers.get('x-conversation-id')).toBe(conversationId);
    const continuedChunks = parseSse(await continuedStream.text()).filter((event) => event !== '[DONE]');
    expect(continuedChunks.every((chunk) => chunk.conversation_id === conversationId)).toBe(true);
  });

  test("as on a Medplum server, an answer carries no ETag hashed from its body; a FHIR read carries its version's", async () => {
    const answer = await postChat({ model: MODEL, messages: [{ role: 'user', content: 'First' }] });
    expect(answer.status).toBe(200);
    const { conversation_id: conversationId } = (await answer.json()) as { conversation_id: string };
    expect(answer.headers.get('etag')).toBeNull();
    const models = await fetch(`${host.url}v1/models`, { headers: headers() });
    expect(models.status).toBe(200);
    expect(models.headers.get('etag')).toBeNull();

    const read = await fetch(`${host.url}fhir/R4/Communication/${conversationId}`, { headers: headers() });
    const root = (await read.json()) as Communication;
    expect(read.headers.get('etag')).toBe(`W/"${root.meta?.versionId}"`);
  });

  test('a client that stops reading stops the gateway pulling from the provider; resumed, it gets the whole reply', async () => {
    // Big enough that the sockets' buffers on loopback (a few MB: 15,000 to 40,000 tokens in our runs) hold a small
    // part of it, small enough to stream in a few seconds once the client reads.
    const totalTokens = 120_000;
    emulator.enqueue({ replyTokens: totalTokens }); // no pace: only back-pressure can hold the emulator back
    const response = await openStream({ model: MODEL, stream: true, max_tokens: totalTokens, messages: [{ role: 'user', content: 'Tell me everything' }] });
    expect(response.statusCode).toBe(200);

    // Nothing reads `response` yet. Without back-pressure the gateway would drain the emulator to the end.
    const heldAt = await waitForStable(() => emulator.received[0]?.tokensSent ?? 0, 500);
    expect(heldAt).toBeGreaterThan(0);
    expect(heldAt).toBeLessThan(totalTokens / 2);
    expect(emulator.received[0].outcome).toBe('pending');

    const raw = await readAll(response);
    expect(raw.endsWith('\n\ndata: [DONE]\n\n')).toBe(true);
    const text = contentOf(parseSse(raw));
    expect(text.length).toBe(numberedReplyLength(totalTokens));
    expect(text.startsWith('token1 token2 ')).toBe(true);
    expect(text.endsWith(` token${totalTokens}`)).toBe(true);
    await waitFor(async () => (emulator.received[0].outcome === 'completed' ? true : undefined));
    expect(emulator.received[0].tokensSent).toBe(totalTokens);
    const reply = await storedReply();
    expect(reply.status).toBe('completed');
    // Over a FHIR string's 1 MiB: the text is kept in several payload items, in order, each within the limit.
    expect(text.length).toBeGreaterThan(1024 * 1024);
    expect(reply.payload?.every((item) => (item.contentString?.length ?? 0) <= 1024 * 1024)).toBe(true);
    expect(reply.payload?.map((item) => item.contentString).join('')).toBe(text);
  });

  // Every write that waits for 'drain' also listens for 'close'; both listeners must go once either fires, or a
  // long reply to a slow client piles up thousands of them.
  test('waiting for a slow client leaves no listeners behind on the response', async () => {
    const closeListenersAtFinish: number[] = [];
    const onRequest = (message: unknown): void => {
      const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
      if (request.socket.localPort === Number(new URL(host.url).port) && request.url === '/v1/chat/completions') {
        response.once('finish', () => closeListenersAtFinish.push(response.listenerCount('close')));
      }
    };
    subscribe('http.server.request.start', onRequest);
    try {
      emulator.enqueue({ replyTokens: 30_000 });
      const response = await openStream({ model: MODEL, stream: true, max_tokens: 30_000, messages: [{ role: 'user', content: 'Go on' }] });
      await waitForStable(() => emulator.received[0]?.tokensSent ?? 0, 200);
      expect((await readAll(response)).endsWith('data: [DONE]\n\n')).toBe(true);
    } finally {
      unsubscribe('http.server.request.start', onRequest);
    }
    expect(closeListenersAtFinish).toHaveLength(1);
    expect(closeListenersAtFinish[0]).toBeLessThan(10);
  });

  /** Starts a streamed request with `node:http` and resolves with the response, unread (paused). */
  async function openStream(body: Record<string, unknown>): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(`${host.url}v1/chat/completions`, { method: 'POST', headers: headers() }, resolve);
      request.on('error', reject);
      request.end(JSON.stringify(body));
    });
  }
});

/** Parses SSE text into its `data:` events. */
function parseSse(raw: string): SseEvent[] {
  return raw
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => {
      const data = block.slice('data: '.length);
      return data === '[DONE]' ? '[DONE]' : (JSON.parse(data) as Record<string, unknown>);
    });
}

/** The reply text carried by the chunks' `delta.content`. */
function contentOf(events: readonly SseEvent[]): string {
  let text = '';
  for (const event of events) {
    const choices = event === '[DONE]' ? undefined : (event.choices as { delta?: { content?: string } }[] | undefined);
    text += choices?.[0]?.delta?.content ?? '';
  }
  return text;
}

/** Length of the emulator's `token1 token2 … tokenN` reply. */
function numberedReplyLength(count: number): number {
  let length = 0;
  for (let index = 1; index <= count; index++) {
    length += `token${index}`.length + (index > 1 ? 1 : 0);
  }
  return length;
}

async function readAll(response: IncomingMessage): Promise<string> {
  response.setEncoding('utf8');
  let text = '';
  for await (const chunk of response) {
    text += chunk as string;
  }
  return text;
}

/** Polls until the value has not changed for `stableMs`, and returns it. */
async function waitForStable(read: () => number, stableMs: number, timeoutMs = 5000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let value = read();
  let since = Date.now();
  while (Date.now() - since < stableMs) {
    if (Date.now() > deadline) {
      throw new Error(`Still changing after ${timeoutMs} ms (last value ${value})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
    const next = read();
    if (next !== value) {
      value = next;
      since = Date.now();
    }
  }
  return value;
}
