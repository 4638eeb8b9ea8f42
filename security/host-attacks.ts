/**
 * Attacks on the standalone host as `npm start` and the Docker image run it: a process of its own
 * (`plugin/hosts/standalone/main.ts`) on a temporary data folder, with a user who signs in with a password.
 * - sign-in: a flood of sign-ins while a clinician chats (the host's chat must keep its pace and the flood must be
 *   throttled); 60 wrong passwords from one source, then the right one; the right one from another source
 *   meanwhile (must work: a stranger cannot lock the owner out); 30 sources guessing one account; unknown e-mails;
 * - data folder: a second host started on the same folder, a host started on a port in use (one line, nothing left
 *   behind), the data folder deleted while the host runs (no write acknowledged, health failing).
 * Every source is a loopback address of its own (127.0.6.x–127.0.9.x), so each is a caller the host tells apart.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Project, ProjectMembership } from '@medplum/fhirtypes';
import { ensureAdminClient } from '../plugin/hosts/standalone/admin-client.ts';
import { inviteUser } from '../plugin/hosts/standalone/admin/invite-user.ts';
import { createAccessTokenService } from '../plugin/hosts/standalone/auth/access-tokens.ts';
import { startLogin } from '../plugin/hosts/standalone/auth/logins.ts';
import { loadSigningKeys } from '../plugin/hosts/standalone/auth/signing-keys.ts';
import { loadFhirDefinitions } from '../plugin/hosts/standalone/fhir-definitions.ts';
import { openStandaloneStore } from '../plugin/hosts/standalone/open-store.ts';
import { readProjectFixture, seedProject } from '../plugin/hosts/standalone/seed.ts';
import { postJsonFrom } from '../test/support/from-address.ts';
import { startHostProcess, type HostProcess } from '../test/support/host-process.ts';
import type { SecurityContext } from './context.ts';
import type { AttackLog } from './suite.ts';

const SIGN_IN = 'sign-in';
const DATA_FOLDER = 'data folder';
const ISSUER = 'http://fhirgate.security-host.test/';
const PASSWORD = 'correct horse battery staple 7f3a';
const OWNER = 'owner.sign-in@example.test';
const SPREAD_TARGET = 'spread.sign-in@example.test';
const UNKNOWN_TARGET = 'unknown-mails.sign-in@example.test';
const FLOOD_LOOPS = 64;
// Each looping sign-in sends its next one at most this often: 640 a second in all, a load any host must absorb.
const FLOOD_PACE_MS = 100;
const FLOOD_MS = 5000;

interface HostUnderAttack {
  readonly dataDir: string;
  readonly host: HostProcess;
  readonly projectId: string;
  /** The demo practitioner's access token. */
  readonly chatToken: string;
  /** An access token of the demo project's administrator client: its FHIR writes are allowed. */
  readonly adminToken: string;
}

export async function hostAttacks(context: SecurityContext): Promise<void> {
  const target = await startHostUnderAttack();
  try {
    await signInFlood(context.log, target);
    await signInGuessing(context.log, target);
    await secondHost(context.log, target);
    await takenPort(context.log, target);
    await deletedDataFolder(context.log, target);
    await context.log.run('secrets in logs', "the password in the host process's log lines", async () => {
      const leaked = target.host.logs().split('\n').filter((line) => line.includes(PASSWORD)).length;
      return { status: 0, letThrough: leaked > 0, note: leaked ? `${leaked} lines` : undefined };
    });
  } finally {
    await stop(target.host);
    rmSync(target.dataDir, { recursive: true, force: true });
  }
}

/** A data folder with the demo project and three users who sign in with a password; the host started on it. */
async function startHostUnderAttack(): Promise<HostUnderAttack> {
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-security-host-'));
  loadFhirDefinitions();
  const store = openStandaloneStore(dataDir);
  let projectId: string;
  let chatToken: string;
  let adminToken: string;
  try {
    const demo = await seedProject(store, await readProjectFixture(), { freshIds: false });
    projectId = demo.projectId;
    const project = await store.readResource<Project>('Project', projectId);
    for (const [email, lastName] of [
      [OWNER, 'Owner'],
      [SPREAD_TARGET, 'Spread'],
      [UNKNOWN_TARGET, 'Unknown'],
    ] as const) {
      await inviteUser(store, project, { resourceType: 'Practitioner', firstName: 'Sign-in', lastName, email, password: PASSWORD });
    }
    // The clinician who chats during the flood: the demo practitioner, signed in as the token command does.
    const tokens = createAccessTokenService({ keys: await loadSigningKeys(store), issuer: ISSUER });
    const tokenOf = async (membershipId: string): Promise<string> => {
      const membership = await store.readResource<ProjectMembership>('ProjectMembership', membershipId);
      return (await startLogin(store, tokens, { membership, authMethod: 'pre-authorized' })).accessToken;
    };
    chatToken = await tokenOf(demo.ids['practitioner-membership']);
    const admin = { clientId: randomUUID(), membershipId: randomUUID() };
    await ensureAdminClient(store, projectId, admin);
    adminToken = await tokenOf(admin.membershipId);
  } finally {
    store.close();
  }
  const host = await startHostProcess({ FHIRGATE_DATA_DIR: dataDir, FHIRGATE_BASE_URL: ISSUER, AI_PROVIDER: '' });
  return { dataDir, host, projectId, chatToken, adminToken };
}

/** One sign-in from `source`; its status (200 with a code is a signed-in user). */
async function signIn(url: string, source: string, email: string, password: string): Promise<number> {
  const answer = await postJsonFrom(`${url}auth/login`, source, { email, password, codeChallenge: 'x'.repeat(43), codeChallengeMethod: 'plain' });
  return answer.status === 200 && !(answer.body as { code?: string }).code ? 0 : answer.status;
}

/** Milliseconds of one chat turn of the clinician (non-streaming, the demo provider's echo). */
async function timedChat(target: HostUnderAttack, text: string): Promise<{ status: number; milliseconds: number }> {
  const started = performance.now();
  const response = await fetch(`${target.host.url}v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${target.chatToken}`, 'X-Project-ID': target.projectId },
    body: JSON.stringify({ messages: [{ role: 'user', content: text }] }),
  });
  await response.arrayBuffer();
  return { status: response.status, milliseconds: performance.now() - started };
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor(sorted.length / 2)];
};
const pause = (milliseconds: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, milliseconds));

/**
 * 64 looping sign-ins with unknown e-mails, each from an address of its own (so no source reaches its lockout),
 * while the clinician chats. The chat's median during the flood is held against its median just before it, on the
 * same host in the same run: a turn is a prompt write and a reply write, each waiting for an fdatasync on the thread
 * pool, so when password hashing fills the pool every turn waits behind it (seconds, where it took tens of ms).
 * Allowed: four times the quiet median, or 250 ms more, whichever is larger (the flood's own requests take CPU).
 */
async function signInFlood(log: AttackLog, target: HostUnderAttack): Promise<void> {
  const { url } = target.host;
  for (let warm = 0; warm < 3; warm++) await timedChat(target, `warm-up ${warm}`);
  const quiet: number[] = [];
  for (let turn = 0; turn < 10; turn++) quiet.push((await timedChat(target, `quiet ${turn}`)).milliseconds);

  const floodStatuses: number[] = [];
  const floodEnds = Date.now() + FLOOD_MS;
  const flood = Array.from({ length: FLOOD_LOOPS }, async (_, loop) => {
    const source = `127.0.6.${loop + 1}`;
    for (let attempt = 0; Date.now() < floodEnds; attempt++) {
      const started = Date.now();
      floodStatuses.push(await signIn(url, source, `flood-${loop}-${attempt}@example.test`, 'not the password').catch(() => 0));
      await pause(Math.max(0, FLOOD_PACE_MS - (Date.now() - started)));
    }
  });
  // The flood fills up first; then the clinician chats through it.
  await pause(500);
  const flooded: number[] = [];
  const chatStatuses = new Set<number>();
  while (Date.now() < floodEnds - 250) {
    const turn = await timedChat(target, `during the flood ${flooded.length}`);
    flooded.push(turn.milliseconds);
    chatStatuses.add(turn.status);
  }
  await Promise.all(flood);

  const quietMedian = median(quiet);
  const floodedMedian = median(flooded);
  const bound = Math.max(4 * quietMedian, quietMedian + 250);
  const throttled = floodStatuses.filter((status) => status === 429).length;
  const hashed = floodStatuses.filter((status) => status === 400).length;
  log.figure('chat during a sign-in flood', `median ${quietMedian.toFixed(0)} ms quiet, ${floodedMedian.toFixed(0)} ms during ${floodStatuses.length} sign-ins (${hashed} checked, ${throttled} answered 429); bound ${bound.toFixed(0)} ms`);
  await log.run(SIGN_IN, `${FLOOD_LOOPS} looping sign-ins with unknown e-mails while a clinician chats`, async () => {
    const problems = [
      floodedMedian > bound ? `chat's median rose from ${quietMedian.toFixed(0)} to ${floodedMedian.toFixed(0)} ms (bound ${bound.toFixed(0)} ms)` : undefined,
      throttled === 0 ? `none of ${floodStatuses.length} sign-ins was throttled` : undefined,
      flooded.length === 0 || [...chatStatuses].some((status) => status !== 200) ? `chat answered ${[...chatStatuses].join(', ')} over ${flooded.length} turns` : undefined,
    ].filter(Boolean);
    return {
      status: throttled > 0 ? 429 : 400,
      letThrough: problems.length > 0,
      note: problems.length > 0 ? problems.join('; ') : `chat median ${quietMedian.toFixed(0)} → ${floodedMedian.toFixed(0)} ms; ${throttled} of ${floodStatuses.length} sign-ins answered 429`,
    };
  });
}

/** Sends `count` wrong passwords for `email` from `source`, four at a time; the statuses. */
async function wrongPasswords(url: string, source: string | ((index: number) => string), email: string | ((index: number) => string), count: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let index = 0; index < count; index += 4) {
    const batch = Array.from({ length: Math.min(4, count - index) }, (_, offset) => index + offset);
    statuses.push(
      ...(await Promise.all(
        batch.map((attempt) =>
          signIn(url, typeof source === 'string' ? source : source(attempt), typeof email === 'string' ? email : email(attempt), `guess-${attempt}`)
        )
      ))
    );
  }
  return statuses;
}

const summarise = (statuses: readonly number[]): string =>
  [...new Set(statuses)].map((status) => `${statuses.filter((item) => item === status).length}× ${status}`).join(', ');

async function signInGuessing(log: AttackLog, target: HostUnderAttack): Promise<void> {
  const { url } = target.host;
  const attacker = '127.0.7.1';
  const guesses = await wrongPasswords(url, attacker, OWNER, 60);
  await log.run(SIGN_IN, '60 wrong passwords from one source, then the right one from there', async () => {
    const right = await signIn(url, attacker, OWNER, PASSWORD);
    return {
      status: right,
      letThrough: right === 200 || !guesses.includes(429),
      note: `the guesses: ${summarise(guesses)}; then the right password: ${right}${right === 200 ? ' (signed in during the lockout)' : ''}`,
    };
  });
  await log.run(SIGN_IN, "the owner's right password from another source while that source is locked out", async () => {
    const owner = await signIn(url, '127.0.7.2', OWNER, PASSWORD);
    return { status: owner, letThrough: owner !== 200, note: owner === 200 ? undefined : `the owner was locked out by a stranger (${owner})` };
  });

  const spread = await wrongPasswords(url, (index) => `127.0.8.${Math.floor(index / 2) + 1}`, SPREAD_TARGET, 60);
  await log.run(SIGN_IN, '60 wrong passwords for one account from 30 sources (2 each), then the right one from one of them', async () => {
    const right = await signIn(url, '127.0.8.30', SPREAD_TARGET, PASSWORD);
    return { status: right, letThrough: right === 200, note: `the guesses: ${summarise(spread)}; then the right password from a guessing source: ${right}` };
  });
  await log.run(SIGN_IN, "that account's right password from a source that never failed on it, during its lockout", async () => {
    const owner = await signIn(url, '127.0.8.200', SPREAD_TARGET, PASSWORD);
    return { status: owner, letThrough: owner !== 200, note: owner === 200 ? undefined : `the owner was locked out by strangers (${owner})` };
  });

  const unknown = await wrongPasswords(url, '127.0.9.1', (index) => `nobody-${index}@example.test`, 60);
  await log.run(SIGN_IN, '60 sign-ins with unknown e-mails from one source, then a real account from there', async () => {
    const right = await signIn(url, '127.0.9.1', UNKNOWN_TARGET, PASSWORD);
    return { status: right, letThrough: right === 200, note: `the unknown e-mails: ${summarise(unknown)}; then a real account's right password: ${right}` };
  });

  // Unknown e-mails cost what known ones do: no telling who has an account by the time of a refusal.
  const timed = async (email: string, source: string): Promise<number> => {
    const started = performance.now();
    await signIn(url, source, email, 'a wrong password');
    return performance.now() - started;
  };
  const known: number[] = [];
  const unknownTimes: number[] = [];
  // Alternating which goes first, so that neither always follows the other.
  for (let round = 0; round < 8; round++) {
    const measureKnown = async (): Promise<void> => void known.push(await timed(OWNER, `127.0.9.${10 + round}`));
    const measureUnknown = async (): Promise<void> => void unknownTimes.push(await timed(`nobody-timed-${round}@example.test`, `127.0.9.${30 + round}`));
    for (const measure of round % 2 === 0 ? [measureKnown, measureUnknown] : [measureUnknown, measureKnown]) await measure();
  }
  log.figure('sign-in timing', `a wrong password: median ${median(known).toFixed(1)} ms for a known e-mail, ${median(unknownTimes).toFixed(1)} ms for an unknown one`);
}

interface Exited {
  readonly code: number | null;
  readonly stderr: string;
  /** True when it logged its start-up line (it started; it is stopped right after). */
  readonly started: boolean;
}

/** Runs `main.ts` with `env` until it exits or logs its start-up line (then SIGTERM); what it printed. */
function runHost(env: Record<string, string>, timeoutMs = 60_000): Promise<Exited> {
  const child = spawn(process.execPath, ['plugin/hosts/standalone/main.ts'], {
    env: { ...process.env, LOG_LEVEL: 'info', AI_PROVIDER: '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  let started = false;
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (!started && stderr.includes('"msg":"fhirgate standalone host started"')) {
      started = true;
      child.kill('SIGTERM');
    }
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, started });
    });
  });
}

/** The lines a person reads (not the JSON log lines). */
const plainLines = (stderr: string): string[] => stderr.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('{'));

async function secondHost(log: AttackLog, target: HostUnderAttack): Promise<void> {
  const before = readFileSync(join(target.dataDir, 'host.json'), 'utf8');
  const pid = String(target.host.child.pid);
  await log.run(DATA_FOLDER, 'a second host started on the same data folder (another port, no base URL)', async () => {
    const second = await runHost({ FHIRGATE_DATA_DIR: target.dataDir, PORT: '0' });
    const after = readFileSync(join(target.dataDir, 'host.json'), 'utf8');
    const lines = plainLines(second.stderr);
    const problems = [
      second.started ? 'it started' : undefined,
      after !== before ? "it rewrote host.json: the token command now signs for the wrong issuer" : undefined,
      !second.started && !(lines.length === 1 && lines[0].startsWith('fhirgate cannot start:') && lines[0].includes(target.dataDir) && lines[0].includes(pid))
        ? `not one line naming the folder and pid ${pid}: ${lines.join(' | ').slice(0, 300)}`
        : undefined,
    ].filter(Boolean);
    return { status: second.started ? 200 : 0, letThrough: problems.length > 0, note: problems.length > 0 ? problems.join('; ') : lines[0] };
  });
}

async function takenPort(log: AttackLog, target: HostUnderAttack): Promise<void> {
  const port = new URL(target.host.url).port;
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-security-port-'));
  try {
    await log.run(DATA_FOLDER, `a host started on a port in use (${port})`, async () => {
      const refused = await runHost({ FHIRGATE_DATA_DIR: dataDir, PORT: port });
      const lines = plainLines(refused.stderr);
      const journal = join(dataDir, 'journal');
      const leftBehind = existsSync(journal) ? readdirSync(journal) : [];
      const problems = [
        refused.started || refused.code === 0 ? `it exited with ${refused.code}` : undefined,
        refused.stderr.includes('\n    at ') ? 'a stack trace was printed' : undefined,
        !(lines.length === 1 && lines[0].startsWith('fhirgate cannot start:') && lines[0].includes(port) && lines[0].includes('PORT='))
          ? `not one line naming the port and PORT=: ${lines.slice(0, 3).join(' | ').slice(0, 300)}`
          : undefined,
        leftBehind.length > 0 ? `left ${leftBehind.length} journal folder(s) behind` : undefined,
      ].filter(Boolean);
      return { status: 0, letThrough: problems.length > 0, note: problems.length > 0 ? problems.join('; ') : lines[0] };
    });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The data folder deleted under the running host (`rm -rf data`): the store's open file outlives its name, so
 * whatever it acknowledges from then on is gone at the next start. It must refuse (503, the refusal called for:
 * not counted as a server failure) and say so to a load balancer.
 */
async function deletedDataFolder(log: AttackLog, target: HostUnderAttack): Promise<void> {
  const { url } = target.host;
  const refusedAsUnavailable = (status: number, what: string) => ({
    status,
    letThrough: status !== 503,
    expectedServerStatus: 503,
    note: status < 400 ? `acknowledged ${what} it cannot keep` : status !== 503 ? 'expected 503' : undefined,
  });
  rmSync(target.dataDir, { recursive: true, force: true });
  await log.run(DATA_FOLDER, 'a chat turn after the data folder was deleted under the running host', async () => {
    const turn = await timedChat(target, 'Is this kept?');
    return refusedAsUnavailable(turn.status, 'a turn');
  });
  await log.run(DATA_FOLDER, "an administrator's FHIR write after the data folder was deleted", async () => {
    const response = await fetch(`${url}fhir/R4/Observation`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/fhir+json', Authorization: `Bearer ${target.adminToken}` },
      body: JSON.stringify({ resourceType: 'Observation', status: 'final', code: { text: 'Is this kept?' } }),
    });
    await response.arrayBuffer();
    return refusedAsUnavailable(response.status, 'a write');
  });
  await log.run(DATA_FOLDER, 'the health check after the data folder was deleted', async () => {
    const response = await fetch(`${url}healthcheck`);
    const body = (await response.json()) as { ok?: boolean; store?: boolean };
    return { ...refusedAsUnavailable(response.status, 'nothing'), letThrough: response.status !== 503 || body.store !== false, note: body.store === false ? undefined : `store: ${String(body.store)}` };
  });
}

async function stop(host: HostProcess): Promise<void> {
  if (host.child.exitCode !== null) return;
  const exited = new Promise((resolve) => host.child.once('exit', resolve));
  host.child.kill('SIGTERM');
  const timer = setTimeout(() => host.child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}
