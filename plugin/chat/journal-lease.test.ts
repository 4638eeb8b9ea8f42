/**
 * Reply journals that share one folder across containers, where every instance is PID 1: a live writer's journal is
 * never taken (its lease is renewed), a writer gone for good is taken over once its lease expired, and a restart in
 * the same PID namespace still takes its earlier life's journal at once. The pids are simulated (`lease.pid`,
 * `lease.scope` stand for a container's PID 1 and its namespace); the writer that dies is a real process, killed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReplyJournal, readUnfinished, type OpenTurn, type UnfinishedTurn } from './reply-journal.ts';
import { LOCK, STAGING_GRACE_MS, STAGING_PREFIX } from './journal-lease.ts';
import { waitFor } from '../../test/support/wait-for.ts';

const turn = (id: string): OpenTurn => ({
  projectId: 'project-1',
  parties: { categorySystem: 'urn:test', caller: { reference: 'Practitioner/dr' }, agent: { reference: 'Device/agent' } },
  reply: { id, rootId: 'root-1', promptId: `prompt-${id}`, modelId: 'openai/gpt-4o-mini', history: { count: 0 } },
});
/** Short beats, so that a lease expires within the test. */
const FAST = { heartbeatMs: 50, ttlMs: 400 };

/** Another container: a process running `body` with `ReplyJournal` imported; what it says and how it ends. */
function container(body: string): { process: ChildProcess; exited: Promise<number | null>; said(text: string): boolean; stderr(): string } {
  const child = spawn(process.execPath, ['--input-type=module', '-e', `import { ReplyJournal } from './plugin/chat/reply-journal.ts';\n${body}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { process: child, exited, said: (text) => stdout.includes(text), stderr: () => stderr };
}

describe('reply journals sharing a folder across containers', () => {
  let root: string;
  const open: ReplyJournal[] = [];
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'fhirgate-journal-lease-'));
  });
  afterEach(() => {
    for (const journal of open.splice(0)) journal.close();
    rmSync(root, { recursive: true, force: true });
  });
  const openJournal = (container: string, options: { now?: () => number } = {}): ReplyJournal => {
    const journal = ReplyJournal.open(root, { lease: { pid: 1, scope: `container-${container}`, ...FAST, ...options } });
    open.push(journal);
    return journal;
  };

  test('two containers, both PID 1: the second leaves the first\'s live journal alone, and the first keeps writing it', async () => {
    const first = openJournal('a');
    first.open(turn('streaming'));
    first.delivered('streaming', 'Resting heart rate ');
    first.writeWaiting();

    const second = openJournal('b');
    expect(second.unfinished).toEqual([]);
    // Several beats later, still its own.
    const adopted: UnfinishedTurn[] = [];
    second.onAdopted((turns) => adopted.push(...turns));
    await new Promise((resolve) => setTimeout(resolve, FAST.ttlMs * 3));
    expect(adopted).toEqual([]);
    expect(readdirSync(root)).toHaveLength(2);

    first.delivered('streaming', 'is 48 bpm.');
    first.writeWaiting();
    const firstDir = readdirSync(root).find((name) => readUnfinished(readFileSync(join(root, name, 'replies.jsonl'), 'utf8')).length > 0);
    expect(readUnfinished(readFileSync(join(root, firstDir ?? '', 'replies.jsonl'), 'utf8')).map((entry) => entry.delivered)).toEqual(['Resting heart rate is 48 bpm.']);
  });

  test('a container gone for good (SIGKILL): another takes its journal over once the lease expired, while running', async () => {
    const watcher = openJournal('b');
    const adopted: UnfinishedTurn[] = [];
    watcher.onAdopted((turns) => adopted.push(...turns));

    const writer = container(`
      const journal = ReplyJournal.open(${JSON.stringify(root)}, { lease: { pid: 1, scope: 'container-a', heartbeatMs: ${FAST.heartbeatMs}, ttlMs: ${FAST.ttlMs} } });
      journal.open(${JSON.stringify(turn('cut-off'))});
      journal.delivered('cut-off', 'Half a reply');
      journal.writeWaiting();
      process.stdout.write('ready\\n');
      setInterval(() => undefined, 1000);`);
    await waitFor(async () => (writer.said('ready') ? true : undefined), 20_000);
    // Alive and beating: not taken, however long.
    await new Promise((resolve) => setTimeout(resolve, FAST.ttlMs * 3));
    expect(adopted).toEqual([]);

    writer.process.kill('SIGKILL');
    await writer.exited;
    await waitFor(async () => (adopted.length > 0 ? true : undefined), 10_000);
    expect(adopted.map((entry) => [entry.reply.id, entry.delivered])).toEqual([['cut-off', 'Half a reply']]);
    // Moved into the watcher's own journal: one folder left, holding the turn until it is recorded.
    expect(readdirSync(root)).toHaveLength(1);
    expect(watcher.openTurns).toBe(1);
    // On the watcher's own file before the old one went: a crash of the watcher now loses nothing of it.
    const kept = readUnfinished(readFileSync(join(root, readdirSync(root)[0] ?? '', 'replies.jsonl'), 'utf8'));
    expect(kept.map((entry) => [entry.reply.id, entry.delivered])).toEqual([['cut-off', 'Half a reply']]);
  }, 30_000);

  test('a journal opening beside another container beating is never taken from under it', async () => {
    // The watcher looks at the folder every millisecond while the other container opens and closes its journal, and
    // a journal seen without its lease (or with it half written) would be taken: its opener then fails.
    // Its own lease outlives the test: on a loaded machine a stall of this process longer than a short TTL would let an
    // opener take the watcher's journal at start, which is another guarantee (the tests above), not this one.
    const watcher = ReplyJournal.open(root, { lease: { pid: 1, scope: 'container-b', heartbeatMs: 1, ttlMs: 60_000 } });
    open.push(watcher);
    const opener = container(`
      for (let i = 0; i < 2000; i++) {
        ReplyJournal.open(${JSON.stringify(root)}, { lease: { pid: 1, scope: 'container-a', heartbeatMs: 60000, ttlMs: ${FAST.ttlMs} } }).close();
        if (i % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 2));
      }
      process.stdout.write('opened and closed\\n');`);
    const code = await opener.exited;
    expect({ code, stderr: opener.stderr() }).toEqual({ code: 0, stderr: '' });
    expect(opener.said('opened and closed')).toBe(true);
    // Each closed empty journal is gone; the watcher's own is all that is left.
    expect(readdirSync(root)).toHaveLength(1);
  }, 60_000);

  test('a staging folder left by a container that died opening its journal is removed; one being opened now is not', () => {
    const staging = (name: string) => join(root, `${STAGING_PREFIX}${name}`);
    const lease = (scope: string, expires: number) => JSON.stringify({ instance: scope, pid: 1, scope, expires });
    const longAgo = (Date.now() - STAGING_GRACE_MS * 2) / 1000;
    const made = (name: string, lock?: string, old = true) => {
      mkdirSync(staging(name));
      if (lock !== undefined) writeFileSync(join(staging(name), LOCK), lock);
      if (old) utimesSync(staging(name), longAgo, longAgo);
    };
    made('died-with-lease', lease('container-z', Date.now() - 60_000));
    made('died-before-lease');
    // Being opened now: a lease half written reads as none; one written, about to be renamed into place.
    made('writing-lease-now', '', false);
    made('renaming-now', lease('container-y', Date.now() + 60_000), false);
    // Made long ago by a container that is alive (its lease renewed), stopped before renaming it.
    made('stalled-opener', lease('container-x', Date.now() + 60_000));

    const journal = openJournal('b');
    expect(journal.unfinished).toEqual([]);
    expect(readdirSync(root).filter((name) => name.startsWith(STAGING_PREFIX)).sort()).toEqual(
      ['renaming-now', 'stalled-opener', 'writing-lease-now'].map((name) => `${STAGING_PREFIX}${name}`)
    );
  });

  test("a lease another container stopped renewing is taken at start once expired; a restart in the same namespace takes its earlier life's at once", () => {
    const lost = openJournal('a');
    lost.open(turn('of-a'));
    lost.close();
    // close() with a turn open keeps the folder and drops the lock: any start takes it. A lease left by a kill:
    const killed = openJournal('a');
    killed.open(turn('killed'));
    // Seen from another container a minute later (its lease long expired).
    const later = openJournal('b', { now: () => Date.now() + 60_000 });
    expect(later.unfinished.map((entry) => entry.reply.id).sort()).toEqual(['killed', 'of-a']);

    // The same container started again (same namespace, PID 1 again): its earlier life's journal at once.
    const earlierLife = openJournal('c');
    earlierLife.open(turn('before-restart'));
    const restarted = openJournal('c');
    expect(restarted.unfinished.map((entry) => entry.reply.id)).toEqual(['before-restart']);
  });
});
