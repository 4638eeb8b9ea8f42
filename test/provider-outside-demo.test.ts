/**
 * With AI_PROVIDER unset the standalone host answers with its offline echo only as the laptop demo (`npm start` on
 * the demo's data folder). In production (NODE_ENV=production, as the Docker image sets it) or on a data folder that
 * is not the demo's (FHIRGATE_SEED_DEMO=false) it refuses to start, in one line naming AI_PROVIDER, having written
 * nothing; AI_PROVIDER=demo chooses the echo on purpose, also in production.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { demoToken, startHostProcess, type HostProcess } from './support/host-process.ts';

const ISSUER = 'http://fhirgate.provider-choice.test/';
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
// The test's own environment may name a provider; each case sets or removes the variables it is about.
const { AI_PROVIDER: _provider, AI_MODEL: _model, AI_API_KEY: _key, AI_API_BASE: _base, ...inherited } = process.env;

/** Runs the host's entry with `env` and waits for it to end (a refused start ends at once). */
function startExpectingRefusal(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['plugin/hosts/standalone/main.ts'], { env: { ...inherited, PORT: '0', ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, stderr });
    }),
  );
}

/** One chat turn as the demo's README sends it; the reply's text. */
async function chat(host: HostProcess, token: string, content: string): Promise<{ status: number; model?: string; text?: string }> {
  const response = await fetch(`${host.url}v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'X-Project-ID': DEMO_PROJECT },
    body: JSON.stringify({ messages: [{ role: 'user', content }] }),
  });
  const body = (await response.json()) as { model?: string; choices?: { message: { content: string } }[] };
  return { status: response.status, model: body.model, text: body.choices?.[0]?.message.content };
}

describe('the offline echo provider outside the demo', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'fhirgate-provider-choice-'));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  test.each([
    ['NODE_ENV=production (the Docker image)', { NODE_ENV: 'production' }, 'NODE_ENV is production'],
    ['a data folder that is not the demo\'s (FHIRGATE_SEED_DEMO=false)', { FHIRGATE_SEED_DEMO: 'false' }, 'FHIRGATE_SEED_DEMO is false'],
  ])('with AI_PROVIDER unset and %s the host does not start, and says to set AI_PROVIDER', async (_name, env, why) => {
    const dataDir = join(root, `refused-${why.split(' ')[0]}`);
    const { code, stderr } = await startExpectingRefusal({ ...env, FHIRGATE_DATA_DIR: dataDir });
    expect(code).toBe(1);
    expect(stderr).toContain(`fhirgate cannot start: no LLM provider configured (AI_PROVIDER is unset, and ${why}`);
    expect(stderr).toContain('Set AI_PROVIDER (openai, azure, anthropic, ollama or openai-compatible)');
    expect(stderr).not.toContain('DEMO provider');
    // Refused before anything was opened: no store, no journal.
    expect(existsSync(dataDir)).toBe(false);
  }, 90_000);

  test.each([
    ['`npm start` on a laptop (AI_PROVIDER unset, the demo folder)', { AI_PROVIDER: '' }],
    ['AI_PROVIDER=demo in production', { NODE_ENV: 'production', AI_PROVIDER: 'demo' }],
  ])('%s answers with the echo', async (name, env) => {
    const dataDir = join(root, name.startsWith('AI_PROVIDER') ? 'chosen' : 'laptop');
    const host = await startHostProcess({ ...inherited, ...env, FHIRGATE_DATA_DIR: dataDir, FHIRGATE_BASE_URL: ISSUER } as Record<string, string>);
    try {
      expect(host.logs()).toContain('"msg":"No LLM provider configured: answering with the offline DEMO provider');
      const answer = await chat(host, await demoToken(dataDir, ISSUER), 'Is the demo running?');
      expect(answer).toEqual({ status: 200, model: 'demo/echo', text: expect.stringContaining('Is the demo running?') });
    } finally {
      const exited = new Promise((resolve) => host.child.once('exit', resolve));
      host.child.kill('SIGTERM');
      await exited;
    }
  }, 120_000);
});
