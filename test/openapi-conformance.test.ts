/**
 * fhirgate's OpenAPI description kept true: real requests to the standalone host (with the emulator as the
 * provider) and their real answers validated against it with ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect):
 * every JSON answer, every event of every stream (chat chunks, in-band errors, Responses events), the error body
 * of each status, and each request body sent. The last test checks that every operation the description names was
 * answered here, and which error statuses were.
 */
import { readFile } from 'node:fs/promises';
import type { Device, Project } from '@medplum/fhirtypes';
import { print } from 'graphql';
import { buildOpenApiDocument } from '../plugin/openapi/openapi-document.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { CREATE_OBSERVATION, observationInput } from './support/observation-mutation.ts';
import { OpenApiValidator, type SeenAnswer } from './support/openapi-validator.ts';
import { projectAdministrator } from './support/project-administrator.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

const DEVICE_SYSTEM = 'urn:example:devices';
const DEVICE_KEY = 'Monitor-Key-5555-openapi-Wq3z';

describe('the OpenAPI description holds for real requests and answers', () => {
  const document = buildOpenApiDocument();
  const validator = new OpenApiValidator(document);
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let caller: Record<string, string>;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      pluginFor: (seeded) => ({
        llm: {
          providers: {
            openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } },
            anthropic: { kind: 'anthropic', apiKey: 'sk-ant-test', baseUrl: emulator.url, models: ['claude-haiku-4-5'] },
          },
          defaultModel: 'openai/gpt-4o-mini',
        },
        chatLimits: { maxConcurrentTurns: 1 },
        device_auth: { valid_keys: { 'monitor-1': DEVICE_KEY }, jwt_secret: 'test-device-signing-secret-0123456789abcdef', token_expiry_minutes: 60, identifier_system: DEVICE_SYSTEM, project_id: seeded.projectId },
      }),
    });
    project = host.project as SeededProject;
    const system = await host.standalone.host.getSystemRepo(project.projectId);
    await system.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: DEVICE_SYSTEM, value: 'monitor-1' }] });
    caller = { Authorization: `Bearer ${await host.accessTokenFor(project.ids['practitioner-membership'])}`, 'X-Project-ID': project.projectId };
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(() => emulator.reset());

  /** Sends a request (its body validated first, where the operation has one) and returns the answer as it came. */
  async function send(method: string, url: string, options: { body?: unknown; raw?: string; headers?: Record<string, string>; operation?: string; refused?: boolean } = {}): Promise<SeenAnswer> {
    if (options.body !== undefined && options.operation && !options.refused) {
      validator.expectRequest(method, options.operation, options.body);
    }
    const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    const response = await fetch(`${host.url}${url.replace(/^\//, '')}`, {
      method,
      headers: { ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...options.headers },
      body,
    });
    return { status: response.status, contentType: response.headers.get('content-type') ?? '', text: await response.text() };
  }

  /** Sends, then validates the answer under `operation` (the description's path template). */
  async function exchange(
    method: string,
    url: string,
    operation: string,
    options: { body?: unknown; raw?: string; headers?: Record<string, string>; refused?: boolean } = {}
  ): Promise<{ answer: SeenAnswer; parsed: unknown }> {
    const answer = await send(method, url, { ...options, operation });
    return { answer, parsed: validator.expectAnswer(method, operation, answer) };
  }

  // `refused`: a body sent to be refused, whose request is not validated (the description need not take it).
  const chat = (body: Record<string, unknown>, headers: Record<string, string> = caller, refused = false) => exchange('POST', '/v1/chat/completions', '/v1/chat/completions', { body, headers, refused });
  const responses = (body: Record<string, unknown>, headers: Record<string, string> = caller, refused = false) => exchange('POST', '/v1/responses', '/v1/responses', { body, headers, refused });
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const calls = (content: string): string => `${content} [emulator-behaviour ${JSON.stringify({ toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' } }]] })}]`;

  test('the description is served, unauthenticated, at /v1/openapi.json and /fhirgate/openapi.json, and docs/openapi.json is it', async () => {
    const committed: unknown = JSON.parse(await readFile(new URL('../docs/openapi.json', import.meta.url), 'utf8'));
    for (const path of ['/v1/openapi.json', '/fhirgate/openapi.json']) {
      const { answer, parsed } = await exchange('GET', path, path);
      expect(answer.status).toBe(200);
      expect(parsed).toEqual(JSON.parse(JSON.stringify(document)));
    }
    expect(committed).toEqual(JSON.parse(JSON.stringify(document)));
  });

  test('chat completions, JSON: a reply, one with a call, one with log probabilities and fhirgate\'s own fields', async () => {
    const first = await chat({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello there' }], temperature: 0.2, max_tokens: 50, user: null });
    const { conversation_id: conversationId } = first.parsed as { conversation_id: string };
    await chat({ messages: [{ role: 'user', content: calls('Weather?') }], tools, tool_choice: 'auto', conversation_id: conversationId });
    await chat({ model: 'anthropic/claude-haiku-4-5', messages: [{ role: 'user', content: 'two words' }], response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', properties: { ok: { type: 'boolean' } } } } } });
    const withLogprobs = await chat({ messages: [{ role: 'user', content: 'two words' }], logprobs: true, top_logprobs: 2, metadata: { ward: '7' }, store: false });
    expect(withLogprobs.answer.status).toBe(200);
  });

  test('chat completions, streamed: every chunk, with usage and log probabilities, with calls, and an in-band error', async () => {
    const streamed = await chat({ messages: [{ role: 'user', content: 'two words' }], stream: true, stream_options: { include_usage: true }, logprobs: true });
    expect((streamed.parsed as unknown[]).length).toBeGreaterThan(4);
    await chat({ messages: [{ role: 'user', content: calls('Weather?') }], tools, stream: true });
    const failing = await chat({ messages: [{ role: 'user', content: `hello there friend [emulator-behaviour ${JSON.stringify({ streamErrorAfterTokens: 1 })}]` }], stream: true });
    expect((failing.parsed as { error?: { code: string } }[]).at(-1)?.error?.code).toBe('upstream_error');
  });

  test('the Responses API: JSON, streamed, with a call, and read back (JSON and as its events)', async () => {
    const created = await responses({ input: 'hello there', instructions: 'Be brief.', max_output_tokens: 50 });
    const { id } = created.parsed as { id: string };
    await responses({ input: [{ role: 'user', content: 'two words' }], stream: true, include: ['message.output_text.logprobs'], previous_response_id: id });
    await responses({ input: calls('Weather?'), tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }], stream: true });
    await exchange('GET', `/v1/responses/${id}`, '/v1/responses/{id}', { headers: caller });
    const replayed = await exchange('GET', `/v1/responses/${id}?stream=true`, '/v1/responses/{id}', { headers: caller });
    expect(replayed.answer.contentType).toContain('text/event-stream');
  });

  test('models, one model, the usage report and the governance settings', async () => {
    const list = await exchange('GET', '/v1/models', '/v1/models', { headers: caller });
    expect((list.parsed as { data: unknown[] }).data).toHaveLength(2);
    await exchange('GET', '/v1/models/openai%2Fgpt-4o-mini', '/v1/models/{id}', { headers: caller });
    const admin = await projectAdministrator(host, project);
    const administrator = { Authorization: `Bearer ${admin.getAccessToken()}`, 'X-Project-ID': project.projectId };
    await chat({ messages: [{ role: 'user', content: 'hello' }] });
    const report = await exchange('GET', '/v1/usage', '/v1/usage', { headers: administrator });
    expect((report.parsed as { data: unknown[] }).data.length).toBeGreaterThan(0);
    await exchange('GET', '/v1/usage?group_by=', '/v1/usage', { headers: administrator });
    expect((await exchange('GET', '/v1/usage', '/v1/usage', { headers: caller })).answer.status).toBe(200);
    expect((await exchange('GET', '/v1/governance', '/v1/governance', { headers: caller })).answer.status).toBe(200);
    expect((await exchange('GET', '/v1/governance?x=1', '/v1/governance', { headers: caller })).answer.status).toBe(400);
    expect((await exchange('GET', '/v1/usage?start=yesterday', '/v1/usage', { headers: administrator })).answer.status).toBe(400);
  });

  test('a device: its token, a GraphQL mutation, a document error, and refusals', async () => {
    const token = await exchange('POST', '/account/api/token/device/', '/account/api/token/device/', { body: { device_id: 'monitor-1', api_key: DEVICE_KEY } });
    const { access } = token.parsed as { access: string };
    const device = { Authorization: `Bearer ${access}` };
    const mutation = { query: print(CREATE_OBSERVATION), variables: { input: observationInput('monitor-1', DEVICE_SYSTEM, 72) } };
    const created = await exchange('POST', '/graphql', '/graphql', { body: mutation, headers: device });
    expect(created.parsed).toMatchObject({ data: { ObservationCreate: { status: 'final' } } });
    const broken = await exchange('POST', '/graphql', '/graphql', { body: { query: 'mutation { ObservationCreate(' }, headers: device });
    expect(broken.answer.status).toBe(200);
    expect((await exchange('POST', '/graphql', '/graphql', { body: mutation })).answer.status).toBe(401);
    expect((await exchange('POST', '/graphql', '/graphql', { body: { query: 'x'.repeat(1_100_000) }, headers: device })).answer.status).toBe(413);
    expect((await exchange('POST', '/account/api/token/device/', '/account/api/token/device/', { body: { device_id: 'monitor-1', api_key: 'wrong-key' } })).answer.status).toBe(403);
    expect((await exchange('POST', '/account/api/token/device/', '/account/api/token/device/', { body: { device_id: 1 }, refused: true })).answer.status).toBe(400);
  });

  test('the error body of each status, with the codes the description gives that status', async () => {
    const statuses = async (...calls: Promise<{ answer: SeenAnswer }>[]): Promise<number[]> => (await Promise.all(calls)).map(({ answer }) => answer.status);
    const hello = { messages: [{ role: 'user', content: 'hello' }] };
    expect(await statuses(
      chat({ ...hello, temperature_scale: 2 }, caller, true),
      responses({ input: 'hello', text: { format: { type: 'json_object', schema: {} } } }, caller, true),
      chat(hello, {}),
      chat(hello, { Authorization: caller.Authorization }),
      chat(hello, { ...caller, 'X-Project-ID': 'another-project' }),
      exchange('GET', '/v1/models/openai%2Fnone', '/v1/models/{id}', { headers: caller }),
      exchange('GET', '/v1/responses/resp_nothing-here', '/v1/responses/{id}', { headers: caller }),
      exchange('POST', '/v1/chat/completions', '/v1/chat/completions', { raw: JSON.stringify({ ...hello, padding: 'x'.repeat(1_100_000) }), headers: caller }),
      chat({ messages: [{ role: 'user', content: `hello [emulator-behaviour ${JSON.stringify({ errorStatus: 500 })}]` }] }),
    )).toEqual([400, 400, 401, 401, 403, 404, 404, 413, 500]);

    // A method the path does not serve: the spec's body, described once for every path.
    const notAllowed = await send('GET', '/v1/chat/completions', { headers: caller });
    expect(notAllowed.status).toBe(405);
    validator.expectAnswer('GET', '/v1/chat/completions', notAllowed, 'Error405');
    const postedDescription = await send('POST', '/fhirgate/openapi.json', { headers: caller });
    expect(postedDescription.status).toBe(405);
    validator.expectAnswer('POST', '/fhirgate/openapi.json', postedDescription, 'Error405');

    // The same Idempotency-Key while its turn still runs: 409; a second turn while the caller's one runs: 429.
    const slow = { messages: [{ role: 'user', content: `hello [emulator-behaviour ${JSON.stringify({ latencyMs: 800 })}]` }] };
    const keyed = { ...caller, 'Idempotency-Key': `openapi-${Date.now()}` };
    const running = chat({ ...slow, stream: true }, keyed);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await chat({ ...slow, stream: true }, keyed)).answer.status).toBe(409);
    await running;
    const busy = chat(slow);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await chat(hello)).answer.status).toBe(429);
    await busy;

    // A project whose settings fhirgate cannot read: 503 not_configured.
    const other = await host.seedProject();
    const stored = await host.store.readResource<Project>('Project', other.projectId);
    await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: 'AI_MODEL_ACCESS', valueString: 'bogus' }] });
    const otherCaller = { Authorization: `Bearer ${await host.accessTokenFor(other.ids['practitioner-membership'])}`, 'X-Project-ID': other.projectId };
    expect((await chat(hello, otherCaller)).answer.status).toBe(503);
  });

  test('the MCP endpoint: a tools/list, a notification, 401 without a credential, and its metadata', async () => {
    const accept = { Accept: 'application/json, text/event-stream' };
    const list = await exchange('POST', '/mcp', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' }, headers: { ...caller, ...accept, 'MCP-Protocol-Version': '2025-11-25' } });
    expect(list.answer.status).toBe(200);
    const initialized = await send('POST', '/mcp', { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, operation: '/mcp', headers: { ...caller, ...accept, 'MCP-Protocol-Version': '2025-11-25' } });
    expect(initialized.status).toBe(202);
    validator.seen.add('POST /mcp 202');
    expect((await exchange('POST', '/mcp', '/mcp', { body: { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers: accept })).answer.status).toBe(401);
    const metadata = await exchange('GET', '/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource/mcp');
    expect(metadata.parsed).toMatchObject({ authorization_servers: [host.url] });
  });

  test('every operation of the description was answered here, and the error statuses were', () => {
    const answered = new Set([...validator.seen].filter((seen) => / 200$/.test(seen)).map((seen) => seen.replace(/ 200$/, '')));
    expect(validator.operations().filter((operation) => !answered.has(operation))).toEqual([]);
    const statuses = new Set([...validator.seen].map((seen) => Number(seen.split(' ').at(-1))));
    expect([400, 401, 403, 404, 405, 409, 413, 429, 500, 503].filter((status) => !statuses.has(status))).toEqual([]);
  });
});
