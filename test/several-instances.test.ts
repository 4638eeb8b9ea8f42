/**
 * Several instances behind a load balancer: two standalone host processes (`npm start`'s entry point) sharing one
 * data folder (`FHIRGATE_SHARED_DATA_DIR=on`: the same SQLite file, the journal's root) and the same Redis. Everything a request needs lives in the store or Redis, so either instance can
 * serve any request: a conversation continues across them, tokens issued by one work on the other, a device's
 * rate limit holds across both, and racing first requests leave one AI agent Device, not two.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { describeWithRedis } from './support/redis.ts';

const run = promisify(execFile);
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
// The load balancer's address: the issuer of every token, whichever instance signs it.
const PUBLIC_URL = 'http://fhirgate.example.test/';

interface Instance {
  readonly url: string;
  readonly process: ChildProcess;
}

/** Starts `plugin/hosts/standalone/main.ts` on a free port and waits for its start-up log line. */
async function startInstance(dataDir: string): Promise<Instance> {
  const child = spawn(process.execPath, ['plugin/hosts/standalone/main.ts'], {
    env: { ...process.env, PORT: '0', FHIRGATE_BASE_URL: PUBLIC_URL, FHIRGATE_DATA_DIR: dataDir, FHIRGATE_SHARED_DATA_DIR: 'on', LOG_LEVEL: 'info', AI_PROVIDER: '' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`instance did not start: ${output}`)), 60_000);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const started = /"msg":"fhirgate standalone host started","url":"([^"]+)"/.exec(output);
      if (started) {
        clearTimeout(timer);
        resolve(started[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`instance exited with ${code}: ${output}`)));
  });
  return { url, process: child };
}

async function stopInstance(instance: Instance): Promise<void> {
  const exited = new Promise((resolve) => instance.process.once('exit', resolve));
  instance.process.kill('SIGTERM');
  await exited;
}

async function command(dataDir: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts', ...args], {
    env: { ...process.env, FHIRGATE_BASE_URL: PUBLIC_URL, FHIRGATE_DATA_DIR: dataDir },
  });
  return stdout.trim();
}

describeWithRedis('two instances on one store and one Redis', () => {
  let dataDir: string;
  let first: Instance;
  let second: Instance;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-instances-'));
    first = await startInstance(dataDir);
    second = await startInstance(dataDir);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([first, second].filter(Boolean).map(stopInstance));
    await rm(dataDir, { recursive: true, force: true });
  });

  function chatClient(instance: Instance, token: string): OpenAI {
    return new OpenAI({ baseURL: `${instance.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': DEMO_PROJECT }, maxRetries: 0 });
  }

  test('a conversation started on one instance continues on the other, with one AI agent Device', async () => {
    const token = await command(dataDir);
    const [a, b] = await Promise.all([
      chatClient(first, token).chat.completions.create({ model: 'demo/echo', messages: [{ role: 'user', content: 'first turn' }] }),
      chatClient(second, token).chat.completions.create({ model: 'demo/echo', messages: [{ role: 'user', content: 'racing turn' }] }),
    ]);
    const conversationId = (a as unknown as { conversation_id: string }).conversation_id;
    expect(b.choices[0].message.content).toBe('Echo: racing turn');

    const continued = await chatClient(second, token).chat.completions.create({
      model: 'demo/echo',
      messages: [{ role: 'user', content: 'second turn' }],
      ...{ conversation_id: conversationId },
    });
    expect((continued as unknown as { conversation_id: string }).conversation_id).toBe(conversationId);

    const turns = await fhirSearch(second, token, `Communication?part-of=Communication/${conversationId}&_sort=sent`);
    expect(turns.map((turn) => turn.payload?.[0]?.contentString)).toEqual(['first turn', 'Echo: first turn', 'second turn', 'Echo: second turn']);
    const replies = [a, b, continued].map((completion) => (completion as unknown as { communication_id: string }).communication_id);
    expect(new Set(replies).size).toBe(3);
    const agents = await fhirSearch(first, await clientToken(first, dataDir), 'Device?identifier=urn:fhirgate:agent|fhirgate-ai-agent');
    expect(agents).toHaveLength(1);
  });

  test("a device token issued by one instance works on the other, and the device's rate limit spans both", async () => {
    const credentials = await command(dataDir, '--device');
    const issued = await fetch(`${first.url}account/api/token/device/`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: credentials });
    const { access } = (await issued.json()) as { access: string };

    const query = { query: '{ __typename }' };
    const post = (instance: Instance) =>
      fetch(`${instance.url}graphql`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` }, body: JSON.stringify(query) });
    expect((await post(second)).status).toBe(200);

    // A fresh one-second window, then a burst over both instances: the device's 10 per second hold in total.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const statuses = await Promise.all(Array.from({ length: 14 }, (_, index) => post(index % 2 === 0 ? first : second).then((response) => response.status)));
    expect(statuses.filter((status) => status === 200)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(4);
  });

  test('a host started on their folder without FHIRGATE_SHARED_DATA_DIR=on is refused it, in one line saying how to join', async () => {
    const refused = await run(process.execPath, ['plugin/hosts/standalone/main.ts'], {
      env: { ...process.env, PORT: '0', FHIRGATE_BASE_URL: PUBLIC_URL, FHIRGATE_DATA_DIR: dataDir, AI_PROVIDER: '' },
      timeout: 60_000,
    }).catch((error: { code?: number; stderr?: string }) => error);
    expect((refused as { code?: number }).code).toBe(1);
    const lines = ((refused as { stderr?: string }).stderr ?? '').split('\n').filter((line) => line.startsWith('fhirgate cannot start:'));
    expect(lines).toEqual([expect.stringContaining(`the data folder ${dataDir} is in use by fhirgate instances that share it`)]);
    expect(lines[0]).toContain('Start this one with FHIRGATE_SHARED_DATA_DIR=on to be one of them');
  }, 120_000);
});

/** An access token of the demo integration (it may read Devices), by client credentials. */
async function clientToken(instance: Instance, dataDir: string): Promise<string> {
  const { client_id: clientId, client_secret: clientSecret } = JSON.parse(await command(dataDir, '--client')) as { client_id: string; client_secret: string };
  const response = await fetch(`${instance.url}oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
  return ((await response.json()) as { access_token: string }).access_token;
}

async function fhirSearch(instance: Instance, token: string, query: string): Promise<any[]> {
  const response = await fetch(`${instance.url}fhir/R4/${query}`, { headers: { Authorization: `Bearer ${token}` } });
  const bundle = (await response.json()) as { entry?: { resource: unknown }[] };
  return (bundle.entry ?? []).map((entry) => entry.resource);
}
