/**
 * The reply journal line by line: what it writes for each call (and what it does not), what a later start reads back
 * from the lines alone, and what it makes durable. Beside reply-journal.test.ts (recovery, batching, rotation) and
 * journal-lease.test.ts (journals shared across containers).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReplyJournal, readUnfinished, type OpenTurn } from './reply-journal.ts';

const turn = (id: string): OpenTurn => ({
  projectId: 'project-1',
  parties: { categorySystem: 'urn:test', caller: { reference: 'Practitioner/dr' }, agent: { reference: 'Device/agent' } },
  reply: { id, rootId: 'root-1', promptId: `prompt-${id}`, modelId: 'openai/gpt-4o-mini', history: { count: 0 } },
});
const call = { id: 'call_1', name: 'read_record', arguments: '{"reference":"Condition/c1"}', result: '{"count":1}', shared: [{ reference: 'Condition/c1' }] };
const endOfLoopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The journal's writes and syncs, recorded. */
function recordedDisk(): { writeLines: (fd: number, text: string) => number; syncFile: (fd: number) => void; writes: string[]; syncs: number } {
  const disk = {
    writes: [] as string[],
    syncs: 0,
    writeLines: (fd: number, text: string): number => {
      disk.writes.push(text);
      return writeSync(fd, text);
    },
    syncFile: (): void => {
      disk.syncs += 1;
    },
  };
  return disk;
}

describe('the reply journal, line by line', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'fhirgate-journal-lines-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const journalDir = (): string => join(root, readdirSync(root)[0] ?? '');
  /** Every line of the journal's file, parsed: a line that is not an entry fails the test. */
  const fileEntries = (): { op: string; id: string }[] =>
    readFileSync(join(journalDir(), 'replies.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { op: string; id: string });

  test('a turn that is not open (closed, or never opened) gets no line: its history, tool calls and text are not written', async () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines });
    journal.open(turn('a'));
    journal.closed('a');
    journal.writeWaiting();
    const written = disk.writes.length;
    for (const id of ['a', 'never-opened']) {
      journal.history(id, { count: 3 });
      journal.toolCall(id, call);
      journal.delivered(id, 'late text');
      journal.closed(id);
    }
    await endOfLoopTurn();
    expect(journal.whenWritten(() => undefined)).toBe(false);
    expect(disk.writes.length).toBe(written);
    // Not even a `closed` line waiting for the next write: close() writes only the one of the turn that was open.
    journal.close();
    expect(disk.writes.slice(written)).toEqual(['{"op":"closed","id":"a"}\n']);
    expect(readdirSync(root)).toEqual([]);
  });

  test('a turn is open from its open line until it is closed, in a journal with a folder or without', () => {
    for (const journal of [ReplyJournal.open(join(root, 'on-disk')), ReplyJournal.open(undefined)]) {
      expect(journal.isOpen('a')).toBe(false);
      journal.open(turn('a'));
      expect(journal.isOpen('a')).toBe(true);
      expect(journal.isOpen('b')).toBe(false);
      journal.closed('a');
      expect(journal.isOpen('a')).toBe(false);
      journal.close();
    }
  });

  test('empty text gets no line and nothing to wait for', async () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines });
    journal.open(turn('a'));
    const written = disk.writes.length;
    journal.delivered('a', '');
    expect(journal.whenWritten(() => undefined)).toBe(false);
    await endOfLoopTurn();
    expect(disk.writes.length).toBe(written);
  });

  test('text of later turns of the event loop is written at the end of each, not only the first', async () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines });
    journal.open(turn('a'));
    const written = disk.writes.length;
    for (const piece of ['Resting ', 'heart rate ', 'is 48 bpm.']) {
      journal.delivered('a', piece);
      await endOfLoopTurn();
    }
    expect(disk.writes.length - written).toBe(3);
    expect(readUnfinished(readFileSync(join(journalDir(), 'replies.jsonl'), 'utf8'))[0]?.delivered).toBe('Resting heart rate is 48 bpm.');
  });

  test('a later start reads the history and the tool calls from their own lines, the file never rewritten', () => {
    const first = ReplyJournal.open(root);
    first.open(turn('a'));
    first.history('a', { count: 6, oldest: 'c-0' }, { text: 'Allergies: penicillin.', shared: [{ reference: 'AllergyIntolerance/p1' }] });
    first.toolCall('a', call);
    first.delivered('a', 'No penicillin.');
    first.writeWaiting();
    expect(fileEntries().map((entry) => entry.op)).toEqual(['open', 'history', 'tool', 'text']);

    const [recovered] = ReplyJournal.open(root).unfinished;
    expect(recovered?.reply.history).toEqual({ count: 6, oldest: 'c-0' });
    expect(recovered?.reply.patientContext).toEqual({ text: 'Allergies: penicillin.', shared: [{ reference: 'AllergyIntolerance/p1' }] });
    expect(recovered?.reply.fhirTools).toEqual([call]);
    expect(recovered?.delivered).toBe('No penicillin.');
  });

  test('a rewritten file holds what each open turn had: history, tool calls, text and the outbox, and nothing else', () => {
    // rotateBytes 1: every write rewrites the file from what the journal holds, not from its lines.
    const journal = ReplyJournal.open(root, { rotateBytes: 1 });
    journal.open(turn('a'));
    journal.history('a', { count: 2, oldest: 'c-9' });
    journal.toolCall('a', call);
    journal.open(turn('b'));
    journal.outbox('b', { resourceType: 'Communication', status: 'stopped', id: 'b' });
    expect(fileEntries().map((entry) => [entry.op, entry.id])).toEqual([
      ['open', 'a'],
      ['open', 'b'],
      ['outbox', 'b'],
    ]);
    const recovered = ReplyJournal.open(root).unfinished;
    expect(recovered.map((entry) => [entry.reply.id, entry.reply.history, entry.reply.fhirTools?.length, entry.outbox?.status])).toEqual([
      ['a', { count: 2, oldest: 'c-9' }, 1, undefined],
      ['b', { count: 0 }, undefined, 'stopped'],
    ]);
  });

  test('writeWaiting writes only waiting text: closed lines alone keep waiting, and nothing but entries reaches the file', async () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines, closedLinesWaitMs: 60_000 });
    journal.open(turn('a'));
    journal.open(turn('b'));
    const written = disk.writes.length;
    journal.closed('a');
    journal.writeWaiting();
    expect(disk.writes.length).toBe(written);
    journal.delivered('b', 'text');
    journal.writeWaiting();
    expect(disk.writes.slice(written)).toEqual(['{"op":"text","id":"b","text":"text"}\n{"op":"closed","id":"a"}\n']);
    expect(fileEntries().map((entry) => [entry.op, entry.id])).toEqual([
      ['open', 'a'],
      ['open', 'b'],
      ['text', 'b'],
      ['closed', 'a'],
    ]);
    journal.close();
  });

  test('closed lines that went with another write are not written again when their wait ends', async () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines, closedLinesWaitMs: 20 });
    journal.open(turn('a'));
    journal.closed('a');
    journal.open(turn('b'));
    const written = disk.writes.length;
    await sleep(60);
    expect(disk.writes.length).toBe(written);
    journal.close();
  });

  test('close() writes the closed lines waiting, even with no text waiting; with nothing waiting it writes nothing', () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines, closedLinesWaitMs: 60_000 });
    journal.open(turn('a'));
    journal.open(turn('b'));
    journal.closed('a');
    const written = disk.writes.length;
    journal.close();
    expect(disk.writes.slice(written)).toEqual(['{"op":"closed","id":"a"}\n']);
    expect(ReplyJournal.open(root).unfinished.map((entry) => entry.reply.id)).toEqual(['b']);

    // Text alone waiting (a stream's last piece, its turn of the event loop not yet ended) is written too.
    const texts = recordedDisk();
    const streaming = ReplyJournal.open(join(root, 'streaming'), { writeLines: texts.writeLines });
    streaming.open(turn('s'));
    streaming.delivered('s', 'the last piece');
    streaming.close();
    expect(ReplyJournal.open(join(root, 'streaming')).unfinished.map((entry) => entry.delivered)).toEqual(['the last piece']);

    const quiet = recordedDisk();
    const idle = ReplyJournal.open(join(root, 'idle'), { writeLines: quiet.writeLines });
    idle.open(turn('c'));
    const before = quiet.writes.length;
    idle.close();
    expect(quiet.writes.length).toBe(before);
  });

  test('an outbox entry is synced to disk before outbox() returns; text and other lines are not', async () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines, syncFile: disk.syncFile });
    const syncsAtOpen = disk.syncs;
    journal.open(turn('a'));
    journal.history('a', { count: 1 });
    journal.delivered('a', 'text');
    await endOfLoopTurn();
    expect(disk.syncs).toBe(syncsAtOpen);
    journal.outbox('a', { resourceType: 'Communication', status: 'completed', id: 'a' });
    expect(disk.syncs).toBe(syncsAtOpen + 1);
    expect(fileEntries().at(-1)?.op).toBe('outbox');
  });

  test('a rewrite syncs the folder that holds the new file; close() syncs the file', () => {
    const disk = recordedDisk();
    // The journal's own file is made by a rewrite when it opens: the folder is synced then.
    const journal = ReplyJournal.open(root, { syncFile: disk.syncFile });
    expect(disk.syncs).toBe(1);
    journal.open(turn('a'));
    journal.close();
    expect(disk.syncs).toBe(2);
  });

  test('close() twice, and close() of a journal without a folder, do nothing more', () => {
    const journal = ReplyJournal.open(root);
    journal.open(turn('a'));
    journal.close();
    expect(() => journal.close()).not.toThrow();
    const inMemory = ReplyJournal.open(undefined);
    inMemory.open(turn('b'));
    inMemory.closed('b');
    expect(() => inMemory.close()).not.toThrow();
  });

  test('close() of a journal another instance took over (its folder moved away) does not throw, turns open or not', () => {
    for (const turnsLeftOpen of [1, 0]) {
      const journal = ReplyJournal.open(join(root, String(turnsLeftOpen)));
      journal.open(turn('a'));
      if (turnsLeftOpen === 0) journal.closed('a');
      journal.writeWaiting();
      const [dir] = readdirSync(join(root, String(turnsLeftOpen)));
      renameSync(join(root, String(turnsLeftOpen), dir ?? ''), join(root, `taken-${turnsLeftOpen}`));
      expect(() => journal.close()).not.toThrow();
    }
  });

  test('a journal adopted at start keeps nothing of the old one but its turns: the old folder is gone from the new', () => {
    const dying = ReplyJournal.open(root);
    dying.open(turn('a'));
    dying.writeWaiting();
    // No close(): the process died (its lease names this test's own pid, an earlier life).
    const next = ReplyJournal.open(root);
    expect(next.unfinished.map((entry) => entry.reply.id)).toEqual(['a']);
    expect(readdirSync(root)).toHaveLength(1);
    expect(readdirSync(journalDir()).sort()).toEqual(['LOCK', 'replies.jsonl']);
    next.close();
  });

  test("a beat with nothing to adopt leaves the journal's file as it is (no rewrite), and its lease owner-only", async () => {
    const disk = recordedDisk();
    const journal = ReplyJournal.open(root, { syncFile: disk.syncFile, lease: { heartbeatMs: 10, ttlMs: 1_000 } });
    journal.open(turn('a'));
    journal.writeWaiting();
    // A rewrite syncs the folder (above): none while the beats renew the lease.
    const syncs = disk.syncs;
    await sleep(80);
    expect(disk.syncs).toBe(syncs);
    expect(statSync(join(journalDir(), 'LOCK')).mode & 0o777).toBe(0o600);
    journal.close();
  });
});

describe("the journal's hold on the process", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'fhirgate-journal-hold-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  test('journals opened, rewritten and closed leave no file open behind them', () => {
    const openFiles = (): number => readdirSync('/proc/self/fd').length;
    const before = openFiles();
    for (let index = 0; index < 20; index += 1) {
      // rotateBytes 1: every write rewrites the file, and opens the new one in place of the old.
      const journal = ReplyJournal.open(join(root, String(index)), { rotateBytes: 1 });
      journal.open(turn('a'));
      journal.delivered('a', 'text');
      journal.writeWaiting();
      journal.close();
    }
    expect(openFiles()).toBeLessThanOrEqual(before + 2);
  });

  test('an open journal does not keep the process alive: its lease renewal is no reason to stay', () => {
    // A process that opened a journal, wrote a turn and has nothing else to do ends by itself (a command, a test).
    const script = `import { ReplyJournal } from ${JSON.stringify(new URL('./reply-journal.ts', import.meta.url).href)};
const journal = ReplyJournal.open(${JSON.stringify(root)}, { lease: { heartbeatMs: 50 } });
journal.open({ projectId: 'p', parties: { categorySystem: 'urn:test', caller: { reference: 'Practitioner/dr' }, agent: { reference: 'Device/agent' } }, reply: { id: 'a', rootId: 'r', promptId: 'p-a', modelId: 'm', history: { count: 0 } } });
journal.closed('a');`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { timeout: 10_000, encoding: 'utf8' });
    expect(child.error).toBeUndefined();
    expect(child.status).toBe(0);
  });
});

describe("reading a journal's lines", () => {
  const open = (id: string): string => JSON.stringify({ op: 'open', id, ...turn(id) });

  test('lines for a turn with no open line (rewritten away, or torn) are passed over', () => {
    const lines = [JSON.stringify({ op: 'text', id: 'gone', text: 'x' }), JSON.stringify({ op: 'tool', id: 'gone', call }), open('a'), JSON.stringify({ op: 'text', id: 'a', text: 'kept' })];
    expect(readUnfinished(lines.join('\n')).map((entry) => [entry.reply.id, entry.delivered])).toEqual([['a', 'kept']]);
  });

  test('a tool line adds the call to its turn and does not close it', () => {
    const lines = [open('a'), JSON.stringify({ op: 'tool', id: 'a', call }), JSON.stringify({ op: 'tool', id: 'a', call: { ...call, id: 'call_2' } })];
    const [recovered] = readUnfinished(lines.join('\n'));
    expect(recovered?.reply.fhirTools?.map((entry) => entry.id)).toEqual(['call_1', 'call_2']);
  });

  test('a line that is not an entry with an id is passed over: no turn is made of it', () => {
    const { reply: _reply, ...withoutId } = turn('x');
    const lines = ['null', '42', '"open"', JSON.stringify({ op: 'open', ...withoutId }), JSON.stringify({ op: 'open', id: 7, ...withoutId }), '   ', open('a')];
    expect(readUnfinished(lines.join('\n')).map((entry) => entry.reply?.id)).toEqual(['a']);
  });
});
