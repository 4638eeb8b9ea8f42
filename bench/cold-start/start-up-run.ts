/**
 * One cold start of the standalone host exactly as `npm start` runs it (the `#!` line's Node flags, the demo
 * project and device, the offline demo provider, a fresh data folder), and what a user sees of it:
 *   1. from the process's start to "fhirgate standalone host started" (listening);
 *   2. VmRSS once idle (2 s after that line, no request yet);
 *   3. a few chat turns, then the first `/graphql` of the process (the demo device's `ObservationCreate`, the
 *      spec's document) while chat turns keep coming one after another: its time, and the slowest chat turn that
 *      overlapped it;
 *   4. VmRSS after it, and after more device mutations;
 *   5. the first request that needs Medplum's whole GraphQL schema (the same mutation on Medplum's own
 *      `/fhir/R4/$graphql`): its time and VmRSS after it, the host's and its GraphQL worker process's (where the
 *      host builds that schema, apart from its own memory).
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { readResidentBytes, standaloneHostArgs, startNodeProcess, stopProcess, waitForOutput } from '../lib/processes.ts';
import { median } from '../lib/statistics.ts';
import { DEMO_PROJECT_ID } from '../devices/device-host.ts';
import { medplumBody, specBody } from '../devices/observation-mutations.ts';

const run = promisify(execFile);
const MEGABYTE = 1024 * 1024;
const IDLE_SETTLE_MS = 2000;
const CHAT_WARM_UP_TURNS = 10;
// The demo device may make 10 requests per second (its `rate_limit_per_second`).
const DEVICE_REQUEST_SPACING_MS = 110;

/** What one cold start measured; times in ms, memory in MB. */
export interface StartUpRun {
  readonly startUpMs: number;
  readonly idleResidentMegabytes: number;
  readonly chatBeforeP50Ms: number;
  readonly firstTokenExchangeMs: number;
  readonly firstGraphqlMs: number;
  /** The slowest chat turn whose time overlapped the first `/graphql`. */
  readonly chatDuringFirstGraphqlMaxMs: number;
  readonly chatTurnsDuringFirstGraphql: number;
  readonly afterFirstGraphqlResidentMegabytes: number;
  readonly afterMoreMutationsResidentMegabytes: number;
  readonly firstMedplumGraphqlMs: number;
  readonly afterMedplumGraphqlResidentMegabytes: number;
  /** The host's child processes (its GraphQL worker), 0 when it has none. */
  readonly afterMedplumGraphqlWorkerResidentMegabytes: number;
}

/** The sizes of a run. */
export interface StartUpPlan {
  readonly moreMutations: number;
  readonly core: number | undefined;
}

/** Starts a host, measures it as the file comment says, stops it and removes its data. */
export async function measureColdStart(plan: StartUpPlan): Promise<StartUpRun> {
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-bench-start-'));
  // What `npm start` gets by default, on a free port; no provider configured: the offline demo provider answers.
  const env = { ...process.env, PORT: '0', FHIRGATE_DATA_DIR: dataDir, AI_PROVIDER: '', LOG_LEVEL: 'info' };
  const startedAt = performance.now();
  const child = startNodeProcess(standaloneHostArgs(), { core: plan.core, env, stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    const started = await waitForOutput(child, 'stderr', /"msg":"fhirgate standalone host started","url":"([^"]+)"/, 120_000);
    const startUpMs = performance.now() - startedAt;
    child.stderr?.resume();
    const url = started[1];
    await sleep(IDLE_SETTLE_MS);
    const idleResidentMegabytes = residentMegabytes(child);
    const chat = await chatClient(url, env);
    const warmUp: number[] = [];
    for (let turn = 0; turn < CHAT_WARM_UP_TURNS; turn += 1) warmUp.push(await chat());
    const device = JSON.parse(await printToken(env, '--device')) as { device_id: string; api_key: string };
    let began = performance.now();
    const deviceToken = await exchangeDeviceKey(url, device);
    const firstTokenExchangeMs = performance.now() - began;

    const during = chatAlongside(chat);
    began = performance.now();
    await postGraphql(`${url}graphql`, deviceToken, specBody());
    const firstGraphqlMs = performance.now() - began;
    const overlapping = await during.stop(began, began + firstGraphqlMs);
    await sleep(1000);
    const afterFirstGraphqlResidentMegabytes = residentMegabytes(child);
    await postMany(`${url}graphql`, deviceToken, plan.moreMutations);
    const afterMoreMutationsResidentMegabytes = residentMegabytes(child);

    const clientToken = await clientCredentialsToken(url, env);
    began = performance.now();
    await postGraphql(`${url}fhir/R4/$graphql`, clientToken, medplumBody());
    const firstMedplumGraphqlMs = performance.now() - began;
    await sleep(1000);
    return {
      startUpMs,
      idleResidentMegabytes,
      chatBeforeP50Ms: median(warmUp.slice(CHAT_WARM_UP_TURNS / 2)),
      firstTokenExchangeMs,
      firstGraphqlMs,
      chatDuringFirstGraphqlMaxMs: Math.max(0, ...overlapping),
      chatTurnsDuringFirstGraphql: overlapping.length,
      afterFirstGraphqlResidentMegabytes,
      afterMoreMutationsResidentMegabytes,
      firstMedplumGraphqlMs,
      afterMedplumGraphqlResidentMegabytes: residentMegabytes(child),
      afterMedplumGraphqlWorkerResidentMegabytes: childrenResidentMegabytes(child),
    };
  } finally {
    await stopProcess(child, 20_000);
    await rm(dataDir, { recursive: true, force: true });
  }
}

function residentMegabytes(child: ChildProcess): number {
  return child.pid === undefined ? Number.NaN : readResidentBytes(child.pid) / MEGABYTE;
}

/** The VmRSS of the processes `child` started (Linux's /proc: each thread's `children`), summed. */
function childrenResidentMegabytes(child: ChildProcess): number {
  if (child.pid === undefined) return Number.NaN;
  try {
    const threads = readdirSync(`/proc/${child.pid}/task`);
    const pids = threads.flatMap((thread) => readFileSync(`/proc/${child.pid}/task/${thread}/children`, 'utf8').trim().split(/\s+/).filter(Boolean));
    return pids.reduce((sum, pid) => sum + readResidentBytes(Number(pid)) / MEGABYTE, 0);
  } catch {
    return Number.NaN;
  }
}

async function printToken(env: NodeJS.ProcessEnv, ...args: string[]): Promise<string> {
  return (await run(process.execPath, ['plugin/hosts/standalone/print-token.ts', ...args], { env })).stdout.trim();
}

/** One chat turn (JSON, the demo practitioner, the default model) per call; resolves to its latency in ms. */
async function chatClient(url: string, env: NodeJS.ProcessEnv): Promise<() => Promise<number>> {
  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${await printToken(env)}`, 'X-Project-ID': DEMO_PROJECT_ID };
  return async () => {
    const began = performance.now();
    const response = await fetch(`${url}v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages: [{ role: 'user', content: 'How is the patient?' }] }) });
    const body = await response.text();
    if (!response.ok) throw new Error(`chat: HTTP ${response.status} ${body.slice(0, 300)}`);
    return performance.now() - began;
  };
}

/** Chat turns one after another until stopped; `stop` resolves to the latencies of those that overlapped [from, to]. */
function chatAlongside(chat: () => Promise<number>): { stop: (from: number, to: number) => Promise<number[]> } {
  const turns: { began: number; ended: number }[] = [];
  let stopping = false;
  const loop = (async (): Promise<void> => {
    while (!stopping) {
      const began = performance.now();
      await chat();
      turns.push({ began, ended: performance.now() });
    }
  })();
  return {
    stop: async (from, to) => {
      stopping = true;
      await loop;
      return turns.filter((turn) => turn.began <= to && turn.ended >= from).map((turn) => turn.ended - turn.began);
    },
  };
}

async function exchangeDeviceKey(url: string, device: { device_id: string; api_key: string }): Promise<string> {
  const response = await fetch(`${url}account/api/token/device/`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(device) });
  const body = (await response.json()) as { access?: string };
  if (!response.ok || !body.access) throw new Error(`device token: HTTP ${response.status}`);
  return body.access;
}

async function clientCredentialsToken(url: string, env: NodeJS.ProcessEnv): Promise<string> {
  const client = JSON.parse(await printToken(env, '--client')) as { client_id: string; client_secret: string };
  const response = await fetch(`${url}oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
  });
  if (!response.ok) throw new Error(`client token: HTTP ${response.status}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

async function postGraphql(endpoint: string, token: string, body: string): Promise<void> {
  const response = await fetch(endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` }, body });
  const answer = (await response.json()) as { data?: { ObservationCreate?: { id?: string } }; errors?: unknown };
  if (!response.ok || answer.errors || !answer.data?.ObservationCreate?.id) {
    throw new Error(`POST ${endpoint}: HTTP ${response.status} ${JSON.stringify(answer).slice(0, 500)}`);
  }
}

/** `count` mutations one after another, within the demo device's rate limit (10 per second). */
async function postMany(endpoint: string, token: string, count: number): Promise<void> {
  for (let sent = 0; sent < count; sent += 1) {
    const began = performance.now();
    await postGraphql(endpoint, token, specBody());
    await sleep(Math.max(0, DEVICE_REQUEST_SPACING_MS - (performance.now() - began)));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
