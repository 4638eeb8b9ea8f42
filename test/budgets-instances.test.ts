/**
 * Budgets across instances: two standalone host processes (`npm start`'s entry point) on one SQLite file and one
 * Redis, behind one public address. What a user spends on one instance is counted in Redis, and the other refuses
 * that user's next turn once the budget is used up; the project's budget adds up every user's spend on both. The
 * openai SDK is the client, the project administrator sets the budgets and reads the usage report, and
 * MedplumClient reads back what was stored.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type { Communication, ProjectMembership } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startHostProcess, demoToken, type HostProcess } from './support/host-process.ts';
import { connectTestRedis, describeWithRedis } from './support/redis.ts';
import { signInWithPassword } from './support/password-sign-in.ts';
import { waitFor } from './support/wait-for.ts';

const run = promisify(execFile);
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const ALICE = 'Practitioner/a1f0c0de-0000-4000-8000-000000000201';
const OWN_CONVERSATIONS_POLICY = 'AccessPolicy/a1f0c0de-0000-4000-8000-000000000102';
// The load balancer's address: the issuer of every token, whichever instance signs it.
const PUBLIC_URL = 'http://fhirgate.example.test/';
const MODEL = 'openai-compatible/gpt-4o-mini';

describeWithRedis('budgets on two instances sharing Redis', () => {
  let emulator: LlmEmulator;
  let dataDir: string;
  let first: HostProcess;
  let second: HostProcess;
  let admin: MedplumClient;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-budgets-'));
    const env = {
      FHIRGATE_DATA_DIR: dataDir,
      // Two instances of one deployment on one data folder.
      FHIRGATE_SHARED_DATA_DIR: 'on',
      FHIRGATE_BASE_URL: PUBLIC_URL,
      AI_PROVIDER: 'openai-compatible',
      AI_API_BASE: `${emulator.url}/v1`,
      AI_MODEL: 'gpt-4o-mini',
      AI_MAX_RETRIES: '0',
      FHIRGATE_MODEL_PRICES: `${MODEL}=0.15/0.60`,
      FHIRGATE_GRAPHQL_WARMUP: 'off',
    };
    first = await startHostProcess(env);
    second = await startHostProcess(env);
    const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts', '--admin-client'], { env: { ...process.env, FHIRGATE_DATA_DIR: dataDir, FHIRGATE_BASE_URL: PUBLIC_URL } });
    const credentials = JSON.parse(stdout) as { client_id: string; client_secret: string };
    admin = new MedplumClient({ baseUrl: first.url, fetch });
    await admin.startClientLogin(credentials.client_id, credentials.client_secret);
  }, 180_000);

  afterAll(async () => {
    for (const instance of [first, second].filter(Boolean)) {
      const exited = new Promise((resolve) => instance.child.once('exit', resolve));
      instance.child.kill('SIGTERM');
      await exited;
    }
    await emulator.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  function chat(instance: HostProcess, token: string): OpenAI {
    return new OpenAI({ baseURL: `${instance.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': DEMO_PROJECT }, maxRetries: 0 });
  }

  async function ask(instance: HostProcess, token: string, content: string): Promise<OpenAI.ChatCompletion> {
    return chat(instance, token).chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }] });
  }

  /** Waits until Redis holds `tokens` for `field` of today's hash of the demo project (the instances' shared count). */
  async function redisCounted(field: string, tokens: number): Promise<void> {
    const redis = connectTestRedis();
    const prefix = `fhirgate:test:${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}:`;
    const key = `${prefix}budget:{${DEMO_PROJECT}}:day:${new Date().toISOString().slice(0, 10)}`;
    try {
      await waitFor(async () => (Number(await redis.hget(key, field)) === tokens ? true : undefined));
    } finally {
      await redis.quit();
    }
  }

  async function storedReplies(): Promise<Communication[]> {
    const all = await admin.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });
    return all.filter((record) => record.category?.[0]?.coding?.[0]?.code === 'ai-response');
  }

  test("a user's spend on one instance is refused on the other; the project's budget adds up both users on both", async () => {
    await admin.post(`admin/projects/${DEMO_PROJECT}/settings`, [
      { name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 50 },
      { name: 'AI_BUDGET_PROJECT_DAY_TOKENS', valueInteger: 100 },
    ]);
    const invited: ProjectMembership = await admin.post(`admin/projects/${DEMO_PROJECT}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Bob',
      lastName: 'Stone',
      email: 'bob.stone@example.test',
      password: 'correct horse battery staple',
      membership: { accessPolicy: { reference: OWN_CONVERSATIONS_POLICY } },
    });
    const bob = await signInWithPassword(second.url, { email: 'bob.stone@example.test', password: 'correct horse battery staple', projectId: DEMO_PROJECT });
    const bobToken = bob.getAccessToken() as string;
    const aliceToken = await demoToken(dataDir, PUBLIC_URL);
    emulator.setBehaviour({ usage: { promptTokens: 25, completionTokens: 35 } });

    // Alice spends 60 of her 50 tokens on the first instance: the turn started under budget, so it completes.
    expect((await ask(first, aliceToken, 'First question')).choices[0].message.content).toBe('Echo: First question');
    await redisCounted(`tokens:${ALICE}`, 60);
    const sentBefore = emulator.received.length;
    const repliesBefore = (await storedReplies()).length;

    // The second instance, which never saw her turn, refuses her next one.
    const refused = await ask(second, aliceToken, 'Second question').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect(refused).toMatchObject({ status: 429, error: { code: 'budget_exceeded_user_day', type: 'rate_limit_error' } });
    expect(Number((refused as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after'))).toBeGreaterThan(0);
    expect(emulator.received).toHaveLength(sentBefore);
    expect(await storedReplies()).toHaveLength(repliesBefore);

    // Bob has a budget of his own: his 60 tokens on the second instance bring the project to 120 of 100.
    expect((await ask(second, bobToken, 'Bob asks')).choices[0].message.content).toBe('Echo: Bob asks');
    await redisCounted('tokens', 120);
    await expect(ask(first, bobToken, 'Bob again')).rejects.toMatchObject({ status: 429, error: { code: 'budget_exceeded_project_day' } });

    // What was stored, read with MedplumClient, is what the administrator's report shows, from either instance.
    const replies = await storedReplies();
    expect(replies.map((reply) => reply.recipient?.[0]?.reference).sort()).toEqual([ALICE, invited.profile?.reference].sort());
    const response = await fetch(`${first.url}v1/usage?group_by=user`, { headers: { Authorization: `Bearer ${admin.getAccessToken()}`, 'X-Project-ID': DEMO_PROJECT } });
    const report = (await response.json()) as { data: { user: string; total_tokens: number; cost_usd: number }[] };
    expect(report.data).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ user: ALICE, replies: 1, total_tokens: 60, cost_usd: (25 * 150 + 35 * 600) / 1e9 }),
        expect.objectContaining({ user: invited.profile?.reference, replies: 1, total_tokens: 60 }),
      ]),
    );
  });
});
