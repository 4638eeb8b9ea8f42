/**
 * Request bodies on a real standalone host, as a client sees them: a route with a bearer token refuses a caller
 * without one before reading the body; every route answers a body that is not JSON, too large or too deep in its
 * own error shape (OAuth's, Medplum's OperationOutcome, the spec's, GraphQL's); a path nobody serves is Medplum's
 * 404 outcome, not Express's HTML page; and none of it is printed.
 */
import { request as httpRequest } from 'node:http';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { sendWithBodyHeldBack, type HeldRequest } from './support/raw-http.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';

const SECRET = 'client-secret-that-must-stay-unprinted';

describe('request bodies on the standalone host', () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let token: string;

  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['echo'] });
    host = await startTestHost({
      hostLimits: { maxJsonBytes: 64 * 1024, maxJsonDepth: 16, maxUnauthenticatedRequests: 2 },
      pluginFor: () => ({
        maxJsonDepth: 16,
        maxBodyBytes: 64 * 1024,
        llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, apiKey: 'key', models: ['echo'], retries: { maxRetries: 0 } } }, defaultModel: 'emulator/echo' },
      }),
    });
    project = host.project as SeededProject;
    token = await host.accessTokenFor(project.ids['practitioner-membership']);
  }, 60_000);

  afterAll(async () => {
    await host?.close();
    await emulator?.close();
  });

  test('without a valid token the answer is 401 while the body is still held back', async () => {
    const routes: [string, Record<string, string>][] = [
      ['/fhir/R4/Patient', { 'Content-Type': 'application/fhir+json' }],
      ['/v1/chat/completions', { 'Content-Type': 'application/json', 'X-Project-ID': project.projectId, Authorization: 'Bearer not-a-token' }],
      ['/graphql', { 'Content-Type': 'application/json' }],
      [`/admin/projects/${project.projectId}/invite`, { 'Content-Type': 'application/json' }],
    ];
    for (const [path, headers] of routes) {
      const held: HeldRequest = await sendWithBodyHeldBack(host.url, 'POST', path, headers, 60_000, '{"resourceType":"Patient","name":[');
      try {
        // Resolves only once the server answers: a server that waited for the rest of the body never would.
        expect([path, await held.answered(60_000)]).toEqual([path, 401]);
      } finally {
        held.socket.destroy();
      }
    }
  });

  test('each route answers a body that is not JSON, too large or too deep in its own shape, never quoting it', async () => {
    const stderr = captureStderr();
    const deep = `${'['.repeat(17)}1${']'.repeat(17)}`;
    const json = { 'Content-Type': 'application/json' };
    const routes: [string, Record<string, string>, (body: unknown) => string | undefined][] = [
      ['oauth2/token', json, (body) => (body as { error_description?: string }).error_description],
      ['auth/login', json, outcomeText],
      ['fhir/R4/Patient', { 'Content-Type': 'application/fhir+json', Authorization: `Bearer ${token}` }, outcomeText],
      ['v1/chat/completions', { ...json, Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId }, (body) => (body as { error?: { message?: string } }).error?.message],
    ];
    try {
      for (const [path, headers, messageOf] of routes) {
        const send = async (body: string): Promise<{ status: number; message: string | undefined; text: string }> => {
          const response = await fetch(`${host.url}${path}`, { method: 'POST', headers, body });
          const text = await response.text();
          return { status: response.status, message: messageOf(JSON.parse(text)), text };
        };
        const malformed = await send(`{"client_secret":"${SECRET}"`);
        expect([path, malformed.status, malformed.message]).toEqual([path, 400, 'The request body is not valid JSON.']);
        expect(malformed.text).not.toContain(SECRET);
        const large = await send(JSON.stringify({ padding: 'x'.repeat(70 * 1024) }));
        expect([path, large.status, large.message]).toEqual([path, 413, 'The request body is larger than this server accepts.']);
        const tooDeep = await send(`{"extra":${deep}}`);
        expect([path, tooDeep.status, tooDeep.message]).toEqual([path, 400, 'The request body nests arrays and objects more than 16 levels deep.']);
      }
    } finally {
      stderr.restore();
    }
    expect(stderr.text()).not.toContain(SECRET);
  });

  test("a chat request sent as curl -d sends it (a form's Content-Type) or with no Content-Type is read as JSON; a body that is not JSON is the spec's 400", async () => {
    const chat = JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }] });
    const headers = { Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId };
    const asForm = await fetch(`${host.url}v1/chat/completions`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/x-www-form-urlencoded' }, body: chat });
    expect([asForm.status, ((await asForm.json()) as { object?: string }).object]).toEqual([200, 'chat.completion']);
    const untyped = await postWithoutContentType(`${host.url}v1/chat/completions`, headers, chat);
    expect([untyped.status, (JSON.parse(untyped.text) as { object?: string }).object]).toEqual([200, 'chat.completion']);

    const notJson = await fetch(`${host.url}v1/chat/completions`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'messages=Hello' });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toEqual({ error: { message: 'The request body is not valid JSON.', type: 'invalid_request_error', code: 'invalid_request', param: null } });
  });

  test("a path or method nobody serves is Medplum's 404 OperationOutcome, not an HTML page", async () => {
    for (const [method, path] of [['POST', 'no/such/route'], ['PUT', 'oauth2/token'], ['GET', 'fhir']]) {
      const response = await fetch(`${host.url}${path}`, { method, headers: { 'Content-Type': 'application/json' }, body: method === 'GET' ? undefined : `{"client_secret":"${SECRET}"` });
      expect([method, path, response.status, response.headers.get('content-type')]).toEqual([method, path, 404, 'application/fhir+json; charset=utf-8']);
      expect(outcomeText(await response.json())).toBe('Not found');
    }
  });

  test('OAuth token requests beyond the unauthenticated ones in flight get 429 in OAuth\'s shape, and the places come back', async () => {
    const held: HeldRequest[] = [];
    const tokenRequest = async (): Promise<{ status: number; body: unknown; retryAfter: string | null }> => {
      const response = await fetch(`${host.url}oauth2/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"grant_type":"client_credentials","client_id":"nobody","client_secret":"wrong"}' });
      return { status: response.status, body: await response.json(), retryAfter: response.headers.get('retry-after') };
    };
    try {
      for (let index = 0; index < 2; index++) {
        held.push(await sendWithBodyHeldBack(host.url, 'POST', '/oauth2/token', { 'Content-Type': 'application/json' }, 100, '{"grant_type":'));
      }
      // Until the server has taken the held requests in, a request is answered as usual (401).
      let answer = await tokenRequest();
      while (answer.status === 401) answer = await tokenRequest();
      expect(answer).toEqual({
        status: 429,
        retryAfter: '1',
        body: { error: 'temporarily_unavailable', error_description: 'Too many unauthenticated requests are in progress on this server; retry shortly.' },
      });
    } finally {
      held.forEach((request) => request.socket.destroy());
    }
    let after = await tokenRequest();
    while (after.status === 429) after = await tokenRequest();
    expect(after).toEqual({ status: 401, retryAfter: null, body: { error: 'invalid_client', error_description: 'Invalid client credentials.' } });
  });
});

/** POSTs `body` with no Content-Type header at all (fetch would add `text/plain`). */
async function postWithoutContentType(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const sent = httpRequest(url, { method: 'POST', headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)) } }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk)).on('end', () => resolve({ status: response.statusCode ?? 0, text }));
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

function outcomeText(body: unknown): string | undefined {
  const outcome = body as { resourceType?: string; issue?: { details?: { text?: string } }[] };
  return outcome.resourceType === 'OperationOutcome' ? outcome.issue?.[0]?.details?.text : undefined;
}

function captureStderr(): { text(): string; restore(): void } {
  const chunks: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stderr.write;
  return { text: () => chunks.join(''), restore: () => void (process.stderr.write = write) };
}
