/**
 * `npm run chaos`: many chat requests, JSON and streamed, against the standalone host (its own process, a real
 * SQLite file) and the LLM emulator, each meeting a seeded random fault; during the run another process holds the
 * store's write lock for a while (the store refuses writes), and the host is killed with SIGKILL and restarted.
 * Afterwards the store is reconciled against what every client saw and what the emulator sent (reconcile.ts), and
 * the figures are printed. Then two instances sharing the data folder and the journal's folder, each PID 1 of a PID
 * namespace of its own as containers are, stream and start side by side (shared-journal.ts: where the run may create
 * namespaces). Then the host's Redis (a redis-server of the run's own) is paused and killed while the
 * demo device renews its token and writes Observations (redis-faults.ts). Exits 1 when a record is lost,
 * duplicated or does not match, an instance took another's live journal, or a device request failed or was held up
 * because of Redis.
 *
 *   npm run chaos                           # 3,000 requests, 16 at a time
 *   npm run chaos -- --requests 500 --concurrency 8 --seed 7
 *   npm run chaos -- --short                # 300 requests, 8 at a time: the form CI runs (.ci/run, its exit code a gate)
 *   npm run chaos -- --json summary.json    # also write the figures as JSON
 */
import { readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { readUnfinished } from '../plugin/chat/reply-journal.ts';
import { STORE_FILE_NAME } from '../plugin/hosts/standalone/open-store.ts';
import { decodeContent } from '../plugin/hosts/standalone/store/content-codec.ts';
import { startLlmEmulator } from '../test/emulator/index.ts';
import { demoToken, startHostProcess, until, type HostProcess } from '../test/support/host-process.ts';
import { hasRedisServer, startOwnRedis } from '../test/support/own-redis.ts';
import { readDemoDeviceKey } from '../plugin/hosts/standalone/demo-devices.ts';
import { BLOCKED_AFTER_MS, runRedisFaults, type RedisFaultSummary } from './redis-faults.ts';
import { sendChaosRequest, type ChaosRequest, type ClientSeen } from './client.ts';
import { drawFault, providerBehaviour, seededRandom, type FaultKind } from './faults.ts';
import { reconcile } from './reconcile.ts';
import { runSharedJournal } from './shared-journal.ts';

const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const ISSUER = 'http://fhirgate.chaos.test/';
const LOCK_WINDOW_MS = 4000;
const STALL_MS = 500;

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '16' },
    seed: { type: 'string', default: '20261122' },
    short: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const total = args.short ? 300 : Number(args.requests);
const concurrency = args.short ? 8 : Number(args.concurrency);
const seed = Number(args.seed);
const log = (message: string): void => {
  process.stderr.write(`[chaos] ${message}\n`);
};

const random = seededRandom(seed);
const requests: ChaosRequest[] = Array.from({ length: total }, (_, index) => {
  const fault = drawFault(random);
  const stream = random() < 0.5 || fault === 'client-leaves-mid-stream' || fault === 'client-leaves-during-stall';
  return {
    index,
    marker: `[chaos-${index}]`,
    fault,
    stream,
    behaviour: providerBehaviour(fault),
    leaveAfter: fault === 'client-leaves-mid-stream' ? 1 + Math.floor(random() * 20) : fault === 'client-leaves-during-stall' ? 1 + Math.floor(random() * 5) : Math.floor(random() * 30),
  };
});
const killAt = Math.floor(total * 0.5);
const lockAt = Math.floor(total * 0.25);
const loseAt = Math.floor(total * 0.75);

const emulator = await startLlmEmulator({ models: ['echo'] });
const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-chaos-'));
// The host's Redis is the run's own, so that it can be paused and killed; the shared one is never touched.
const redis = hasRedisServer() ? await startOwnRedis() : undefined;
if (!redis) {
  log('redis-server is not installed: the Redis faults are skipped');
}
// The reply journal's disk: the instance lost for good loses it, and its replacement starts on a fresh one.
let journalDir = join(dataDir, 'journal');
const hostEnvironment = {
  ...(redis ? { REDIS_URL: redis.url } : {}),
  FHIRGATE_DATA_DIR: dataDir,
  FHIRGATE_BASE_URL: ISSUER,
  FHIRGATE_STORE_BUSY_TIMEOUT_MS: '20',
  FHIRGATE_SHUTDOWN_GRACE_MS: '2000',
  // Every request comes from one caller: the per-caller limits would answer most requests 429.
  FHIRGATE_MAX_CONCURRENT_STREAMS: '1000',
  FHIRGATE_MAX_CONCURRENT_TURNS: '1000',
  AI_PROVIDER: 'openai-compatible',
  AI_API_BASE: `${emulator.url}/v1`,
  AI_MODEL: 'echo',
  AI_TIMEOUT_MS: '2000',
  AI_FIRST_TOKEN_TIMEOUT_MS: '1000',
  AI_TOTAL_TIMEOUT_MS: '8000',
  AI_MAX_RETRIES: '1',
};
let host: HostProcess = await startHostProcess({ ...hostEnvironment, FHIRGATE_JOURNAL_DIR: journalDir });
const token = await demoToken(dataDir, ISSUER);
const events = { sigkill: 0, storeLockWindows: 0, recoveredAfterRestart: 0, repliesKeptInOutbox: 0, hostStalls: 0, instancesLost: 0, recoveredByAnotherInstance: 0 };
// True while the host is stopped by stallHost: one stall at a time.
let stalled = false;
const hostLogs: string[] = [];
log(`${total} requests, ${concurrency} at a time, seed ${seed}; host ${host.url}, data ${dataDir}`);

const startedAt = Date.now();
const seen: ClientSeen[] = [];
let next = 0;
const running: Promise<void>[] = [];
// While the host restarts, new requests wait for it (those in flight at the kill break).
let hostReady: Promise<void> = Promise.resolve();
const worker = async (): Promise<void> => {
  while (next < total) {
    const request = requests[next++];
    if (request.index === lockAt) {
      running.push(holdStoreLock(join(dataDir, STORE_FILE_NAME), LOCK_WINDOW_MS));
    }
    if (request.index === killAt) {
      hostReady = killAndRestart();
    }
    if (request.index === loseAt && redis) {
      hostReady = loseAndReplace();
    }
    await hostReady;
    seen.push(await sendChaosRequest(host.url, token, DEMO_PROJECT, request, { onLeave: stallHost }));
  }
};
await Promise.all(Array.from({ length: concurrency }, worker));
await Promise.all(running);
log(`requests done in ${((Date.now() - startedAt) / 1000).toFixed(1)} s; waiting for the outbox to drain`);

await until(() => unfinishedInJournals(journalDir) === 0, 60_000).catch(() => log('the journal still holds unfinished turns'));
if (events.instancesLost > 0) {
  // The lost instance's turns are recorded by its replacement once its beat has expired (about 20 s).
  await until(() => promptsWithoutReply(join(dataDir, STORE_FILE_NAME)) === 0, 60_000).catch(() => log('prompts of the lost instance still lack a reply'));
}
const sharedJournal = await runSharedJournal(redis?.url, log);
if (sharedJournal.skipped) log(`the shared journal across PID namespaces is skipped: ${sharedJournal.skipped}`);
const redisFaults: RedisFaultSummary | undefined = redis
  ? await runRedisFaults({ baseUrl: host.url, redis, deviceKey: readDemoDeviceKey(dataDir), phaseMs: args.short ? 2500 : 5000, hostLogs: () => host.logs(), log })
  : undefined;
const exited = new Promise<number | null>((resolve) => host.child.once('exit', resolve));
host.child.kill('SIGTERM');
const exitCode = await exited;
await redis?.stop();
hostLogs.push(host.logs());
events.repliesKeptInOutbox = hostLogs.join('').split('"msg":"fhirgate kept a reply in the outbox').length - 1;
events.recoveredByAnotherInstance = [...hostLogs.join('').matchAll(/"msg":"fhirgate took over the unfinished replies of a lost instance".*?"replies":(\d+)/g)].reduce((sum, match) => sum + Number(match[1]), 0);
const result = reconcile(join(dataDir, STORE_FILE_NAME), DEMO_PROJECT, seen, emulator.received);
await emulator.close();

const faults: Partial<Record<FaultKind, number>> = {};
const ends: Record<string, number> = {};
for (const client of seen) {
  faults[client.fault] = (faults[client.fault] ?? 0) + 1;
  const end = client.end === 'http-error' ? `http ${client.status}` : client.end;
  ends[end] = (ends[end] ?? 0) + 1;
}
const summary = {
  seed,
  requests: total,
  seconds: Math.round((Date.now() - startedAt) / 100) / 10,
  faults,
  events,
  clientEnds: ends,
  accepted: result.prompts,
  prompts: result.prompts,
  replies: result.replies,
  repliesByStatus: result.repliesByStatus,
  lost: result.lost,
  duplicates: result.duplicates,
  mismatches: result.mismatches.length,
  hostExitCode: exitCode,
  sharedJournal,
  redisFaults,
};
printSummary(summary, result.mismatches);
if (args.json) writeFileSync(args.json, `${JSON.stringify({ ...summary, mismatchDetails: result.mismatches }, null, 2)}\n`);
const redisHeldUp = redisFaults ? redisFaults.failed + redisFaults.blocked + redisFaults.hostLogged.unhandledRedisErrors : 0;
const sharedJournalFailures = sharedJournal.takenFromLiveInstance + sharedJournal.lost + sharedJournal.duplicates + sharedJournal.mismatches.length;
if (result.lost === 0 && result.duplicates === 0 && result.mismatches.length === 0) {
  rmSync(dataDir, { recursive: true, force: true });
} else {
  log(`data kept for inspection: ${dataDir}`);
}
process.exit(result.lost + result.duplicates + result.mismatches.length === 0 && exitCode === 0 && redisHeldUp === 0 && sharedJournalFailures === 0 ? 0 : 1);

/** SIGKILL mid-run, then the same data directory again; the new process records what the killed one left. */
async function killAndRestart(): Promise<void> {
  const killed = host;
  hostLogs.push(killed.logs());
  const gone = new Promise((resolve) => killed.child.once('exit', resolve));
  killed.child.kill('SIGKILL');
  await gone;
  events.sigkill++;
  log('host killed with SIGKILL; restarting');
  host = await startHostProcess({ ...hostEnvironment, FHIRGATE_JOURNAL_DIR: journalDir });
  await until(() => /"msg":"fhirgate recovered unfinished replies"/.test(host.logs()), 5_000).catch(() => undefined);
  const recovered = /"msg":"fhirgate recovered unfinished replies".*?"recovered":(\d+)/.exec(host.logs());
  events.recoveredAfterRestart = Number(recovered?.[1] ?? 0);
}

/**
 * The host stops for a moment (SIGSTOP, then SIGCONT), as a host busy to the point of not reading its sockets does
 * (a long GC pause, a starved CPU): the client that just left and the rest of its reply reach it together.
 */
function stallHost(request: ChaosRequest): void {
  if (request.fault !== 'client-leaves-during-stall' || stalled || host.child.exitCode !== null) return;
  const stalledHost = host;
  stalled = true;
  events.hostStalls++;
  stalledHost.child.kill('SIGSTOP');
  setTimeout(() => {
    stalledHost.child.kill('SIGCONT');
    stalled = false;
  }, STALL_MS);
}

/**
 * An instance lost for good: SIGKILL, and its disk (the reply journal) gone with it. A replacement starts on a fresh
 * disk, sharing only the store and Redis; the lost instance's turns are recorded by the replacement's sweep.
 */
async function loseAndReplace(): Promise<void> {
  const lost = host;
  hostLogs.push(lost.logs());
  const gone = new Promise((resolve) => lost.child.once('exit', resolve));
  lost.child.kill('SIGKILL');
  await gone;
  rmSync(journalDir, { recursive: true, force: true });
  events.instancesLost++;
  journalDir = join(dataDir, `journal-replacement-${events.instancesLost}`);
  log('host lost for good (SIGKILL, its journal gone); a replacement starts on a fresh journal');
  host = await startHostProcess({ ...hostEnvironment, FHIRGATE_JOURNAL_DIR: journalDir });
}

/** Prompts in the store that no reply answers yet. */
function promptsWithoutReply(file: string): number {
  const database = new DatabaseSync(file, { readOnly: true });
  try {
    const communications = database
      .prepare("SELECT content FROM resources WHERE resource_type = 'Communication' AND deleted = 0")
      .all()
      .map((row) => JSON.parse(decodeContent(row.content)) as { id: string; category?: { coding?: { code?: string }[] }[]; inResponseTo?: { reference?: string }[] });
    const answered = new Set(communications.map((item) => item.inResponseTo?.[0]?.reference).filter(Boolean));
    return communications.filter((item) => item.category?.[0]?.coding?.[0]?.code === 'ai-prompt' && !answered.has(`Communication/${item.id}`)).length;
  } finally {
    database.close();
  }
}

/** Another process's transaction on the store file holds its write lock: fhirgate's writes fail meanwhile. */
async function holdStoreLock(file: string, milliseconds: number): Promise<void> {
  const database = new DatabaseSync(file, { timeout: 5000 });
  database.exec('BEGIN IMMEDIATE');
  events.storeLockWindows++;
  log(`store write lock held for ${milliseconds} ms`);
  await new Promise((resolve) => setTimeout(resolve, milliseconds));
  database.exec('ROLLBACK');
  database.close();
}

function unfinishedInJournals(root: string): number {
  if (!existsSync(root)) return 0;
  let count = 0;
  for (const name of readdirSync(root)) {
    const file = join(root, name, 'replies.jsonl');
    if (existsSync(file)) count += readUnfinished(readFileSync(file, 'utf8')).length;
  }
  return count;
}

function printSummary(figures: typeof summary, mismatches: readonly string[]): void {
  const rows: [string, string][] = [
    ['requests', String(figures.requests)],
    ['faults injected', Object.entries(figures.faults).map(([kind, count]) => `${kind} ${count}`).join(', ')],
    ['events', `SIGKILL + restart ${figures.events.sigkill} (replies recovered at the restart ${figures.events.recoveredAfterRestart}), store write-lock windows ${figures.events.storeLockWindows} (replies kept in the outbox ${figures.events.repliesKeptInOutbox}), host stalls ${figures.events.hostStalls}, instances lost for good ${figures.events.instancesLost} (replies recorded by the replacement ${figures.events.recoveredByAnotherInstance})`],
    ['what clients saw', Object.entries(figures.clientEnds).map(([end, count]) => `${end} ${count}`).join(', ')],
    ['accepted (prompts stored)', String(figures.prompts)],
    ['replies', `${figures.replies} (${Object.entries(figures.repliesByStatus).map(([status, count]) => `${status} ${count}`).join(', ')})`],
    ['records lost (must be 0)', String(figures.lost)],
    ['duplicates (must be 0)', String(figures.duplicates)],
    ['mismatches (must be 0)', String(figures.mismatches)],
  ];
  process.stdout.write(`\nfhirgate chaos run, ${figures.seconds} s\n\n| figure | value |\n|---|---|\n${rows.map(([name, value]) => `| ${name} | ${value} |`).join('\n')}\n`);
  for (const mismatch of mismatches.slice(0, 20)) process.stdout.write(`  mismatch: ${mismatch}\n`);
  const shared = figures.sharedJournal;
  process.stdout.write(
    shared.skipped
      ? `\nshared journal across PID namespaces: skipped (${shared.skipped})\n`
      : `\nshared journal across PID namespaces (two instances, each PID 1): ${shared.streams} streams; turns taken from the live instance ${shared.takenFromLiveInstance} (must be 0); lost ${shared.lost}, duplicates ${shared.duplicates}, mismatches ${shared.mismatches.length} (must be 0)\n`,
  );
  for (const mismatch of shared.mismatches.slice(0, 10)) process.stdout.write(`  shared journal mismatch: ${mismatch}\n`);
  if (figures.redisFaults) printRedisFaults(figures.redisFaults);
}

function printRedisFaults(faults: RedisFaultSummary): void {
  const lines = [
    `\nDevice requests while the host's Redis was paused and killed (blocked: over ${BLOCKED_AFTER_MS} ms)\n`,
    '| Redis | token renewals | Observation writes | failed (must be 0) | blocked (must be 0) | median | max |',
    '|---|---|---|---|---|---|---|',
    ...faults.phases.map((phase) => `| ${phase.name} | ${phase.exchanges} | ${phase.writes} | ${phase.failed} | ${phase.blocked} | ${phase.medianMs} ms | ${phase.maxMs} ms |`),
    `\nhost log: Redis unavailable ${faults.hostLogged.unavailable}, Redis back ${faults.hostLogged.recovered}, ioredis unhandled-error reports ${faults.hostLogged.unhandledRedisErrors} (must be 0)`,
    ...faults.phases.flatMap((phase) => phase.failures.map((failure) => `  ${phase.name}: ${failure}`)),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
