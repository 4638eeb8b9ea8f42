/**
 * Two instances sharing the data folder and the reply journal's folder, each PID 1 in a PID namespace of its own,
 * as two containers are (`unshare --pid --fork --mount-proc`, where the run may create namespaces: as root). The
 * first streams slow replies; the second starts meanwhile and looks at the journals of the folder. It must take
 * none of the first's live journal: every stream the client received whole is recorded `completed` with its text
 * (a journal taken would be recorded `stopped` by the second, with the text as far as it had gone).
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { STORE_FILE_NAME } from '../plugin/hosts/standalone/open-store.ts';
import { startLlmEmulator } from '../test/emulator/index.ts';
import { demoToken, startHostProcess, until, type HostProcess } from '../test/support/host-process.ts';
import { sendChaosRequest, type ChaosRequest, type ClientSeen } from './client.ts';
import { reconcile } from './reconcile.ts';

const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const ISSUER = 'http://fhirgate.chaos-shared-journal.test/';
const STREAMS = 8;

/** What the phase came to; `skipped` says why it did not run. */
export interface SharedJournalSummary {
  readonly skipped?: string;
  readonly streams: number;
  /** Turns the second instance recorded from the first's journal while the first was alive (must be 0). */
  readonly takenFromLiveInstance: number;
  readonly lost: number;
  readonly duplicates: number;
  readonly mismatches: readonly string[];
}

type NamespacedHost = HostProcess;

/** Runs the phase against the Redis at `redisUrl` (instances sharing a data folder need one). */
export async function runSharedJournal(redisUrl: string | undefined, log: (message: string) => void): Promise<SharedJournalSummary> {
  const empty = { streams: 0, takenFromLiveInstance: 0, lost: 0, duplicates: 0, mismatches: [] };
  if (!redisUrl) {
    return { ...empty, skipped: 'no Redis (instances sharing a data folder need one)' };
  }
  if (spawnSync('unshare', ['--pid', '--fork', '--mount-proc', '--kill-child', 'true']).status !== 0) {
    return { ...empty, skipped: 'this machine does not let the run create PID namespaces (unshare, as root)' };
  }
  const emulator = await startLlmEmulator({ models: ['echo'] });
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-chaos-shared-journal-'));
  const environment = {
    REDIS_URL: redisUrl,
    FHIRGATE_REDIS_KEY_PREFIX: `fhirgate:chaos-shared-journal:${Date.now()}:`,
    FHIRGATE_DATA_DIR: dataDir,
    FHIRGATE_SHARED_DATA_DIR: 'on',
    FHIRGATE_JOURNAL_DIR: join(dataDir, 'journal'),
    FHIRGATE_BASE_URL: ISSUER,
    AI_PROVIDER: 'openai-compatible',
    AI_API_BASE: `${emulator.url}/v1`,
    AI_MODEL: 'echo',
  };
  const hosts: NamespacedHost[] = [];
  try {
    const first = await startInOwnNamespace(environment);
    hosts.push(first);
    const token = await demoToken(dataDir, ISSUER);
    log('shared journal: the first instance (PID 1 of its namespace) streams; a second (PID 1 of another) starts meanwhile');
    const requests: ChaosRequest[] = Array.from({ length: STREAMS }, (_, index) => ({
      index,
      marker: `[chaos-${index}]`,
      fault: 'none',
      stream: true,
      behaviour: { replyTokens: 160, tokensPerSecond: 20 },
      leaveAfter: 0,
    }));
    const streaming = Promise.all(requests.map((request) => sendChaosRequest(first.url, token, DEMO_PROJECT, request)));
    // The streams are under way (their journals hold open turns) when the second instance opens its journal.
    await until(() => emulator.received.length >= STREAMS, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const second = await startInOwnNamespace(environment);
    hosts.push(second);
    const seen: ClientSeen[] = await streaming;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const recovered = /"msg":"fhirgate recovered unfinished replies".*?"recovered":(\d+)/.exec(second.logs());
    const takenLater = [...second.logs().matchAll(/"msg":"fhirgate took over the reply journal of a stopped instance".*?"replies":(\d+)/g)].reduce((sum, match) => sum + Number(match[1]), 0);
    for (const host of hosts.splice(0)) await stop(host);
    const result = reconcile(join(dataDir, STORE_FILE_NAME), DEMO_PROJECT, seen, emulator.received);
    return {
      streams: seen.length,
      takenFromLiveInstance: Number(recovered?.[1] ?? 0) + takenLater,
      lost: result.lost,
      duplicates: result.duplicates,
      mismatches: result.mismatches,
    };
  } finally {
    for (const host of hosts) host.child.kill('SIGKILL');
    await emulator.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The standalone host as PID 1 of a PID namespace of its own; SIGKILL of `unshare` takes the host with it. */
function startInOwnNamespace(environment: Record<string, string>): Promise<NamespacedHost> {
  return startHostProcess(environment, ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child']);
}

/** SIGTERM (forwarded by `unshare` to its child), then the exit. */
async function stop(host: NamespacedHost): Promise<void> {
  const exited = new Promise((resolve) => host.child.once('exit', resolve));
  host.child.kill('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
}
