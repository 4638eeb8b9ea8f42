import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReplyJournal, journalFileBytes, readUnfinished, type OpenTurn } from './reply-journal.ts';

const turn = (id: string): OpenTurn => ({
  projectId: 'project-1',
  parties: { categorySystem: 'urn:test', caller: { reference: 'Practitioner/dr' }, agent: { reference: 'Device/agent' } },
  reply: { id, rootId: 'root-1', promptId: `prompt-${id}`, modelId: 'openai/gpt-4o-mini', history: { count: 0 } },
});

/** Resolves after the end of this turn of the event loop, when the journal writes the text lines it holds. */
const endOfLoopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The journal's writes, counted, and failing while `failing` is set (as on a full disk). */
function countedWrites(): { writeLines: (fd: number, text: string) => number; writes: string[]; failing: boolean } {
  const state = {
    writes: [] as string[],
    failing: false,
    writeLines: (fd: number, text: string): number => {
      if (state.failing) {
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      }
      state.writes.push(text);
      return writeSync(fd, text);
    },
  };
  return state;
}

describe('ReplyJournal', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'fhirgate-journal-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  test("the next start adopts a dead process's journal: open turns with their text, history and outbox; closed ones gone", async () => {
    const first = ReplyJournal.open(root);
    first.open(turn('a'));
    first.history('a', { count: 4, oldest: 'c-1' });
    first.delivered('a', 'Hello, ');
    first.delivered('a', 'world');
    first.open(turn('b'));
    first.closed('b');
    first.open(turn('c'));
    first.outbox('c', { resourceType: 'Communication', status: 'completed', id: 'c' });
    // No close(): the process died. (Its lock names this test's own pid, which counts as an earlier life.)

    const second = ReplyJournal.open(root);
    const unfinished = second.unfinished.map((entry) => ({ id: entry.reply.id, delivered: entry.delivered, history: entry.reply.history, outbox: entry.outbox?.status }));
    expect(unfinished).toEqual([
      { id: 'a', delivered: 'Hello, world', history: { count: 4, oldest: 'c-1' }, outbox: undefined },
      { id: 'c', delivered: '', history: { count: 0 }, outbox: 'completed' },
    ]);
    // Adopted into the new journal's own file, the old directory removed.
    expect(readdirSync(root)).toHaveLength(1);
    expect(second.openTurns).toBe(2);

    // Still unfinished when this one dies too: the third start finds them again.
    second.closed('a');
    second.writeWaiting();
    second.open(turn('d'));
    const third = ReplyJournal.open(root);
    expect(third.unfinished.map((entry) => entry.reply.id)).toEqual(['c', 'd']);
  });

  test('the FHIR tool calls a turn ran are recovered with it, also after the file was rewritten', async () => {
    const call = { id: 'call_1', name: 'read_record', arguments: '{"reference":"Condition/c1"}', result: '{"count":1}', shared: [{ reference: 'Condition/c1' }] };
    const first = ReplyJournal.open(root, { rotateBytes: 1 });
    first.open(turn('a'));
    first.toolCall('a', call);
    first.delivered('a', 'Treated since 2021.');
    await endOfLoopTurn();
    // rotateBytes 1: every write rewrites the file from what the journal holds.

    const second = ReplyJournal.open(root);
    expect(second.unfinished).toHaveLength(1);
    expect(second.unfinished[0].reply.fhirTools).toEqual([call]);
    expect(second.unfinished[0].delivered).toBe('Treated since 2021.');
  });

  test('a journal whose process is alive is left alone', () => {
    const live = ReplyJournal.open(root);
    live.open(turn('x'));
    const theirs = readdirSync(root)[0];
    // Pretend the first journal belongs to another, live process (this test's parent).
    writeFileSync(join(root, theirs, 'LOCK'), String(process.ppid));
    const mine = ReplyJournal.open(root);
    expect(mine.unfinished).toEqual([]);
    expect(readdirSync(root)).toHaveLength(2);
  });

  test('a torn last line (the process died writing it) is skipped', () => {
    const lines = [
      JSON.stringify({ op: 'open', id: 'a', ...turn('a') }),
      JSON.stringify({ op: 'text', id: 'a', text: 'kept' }),
      '{"op":"text","id":"a","te',
    ];
    expect(readUnfinished(lines.join('\n')).map((entry) => entry.delivered)).toEqual(['kept']);
  });

  test('the file is rewritten with only unfinished turns once it grows past its limit', async () => {
    const journal = ReplyJournal.open(root, { rotateBytes: 4096 });
    journal.open(turn('long'));
    for (let index = 0; index < 200; index++) {
      journal.open(turn(`t${index}`));
      journal.delivered(`t${index}`, 'x'.repeat(100));
      journal.closed(`t${index}`);
      journal.delivered('long', `${index} `);
    }
    await endOfLoopTurn();
    const dir = join(root, readdirSync(root)[0]);
    expect(journalFileBytes(dir)).toBeLessThan(8192);
    const [left] = readUnfinished(readFileSync(join(dir, 'replies.jsonl'), 'utf8'));
    expect(left?.reply.id).toBe('long');
    expect(left?.delivered.startsWith('0 1 2 ')).toBe(true);
    expect(left?.delivered.endsWith('198 199 ')).toBe(true);
  });

  test('closing with nothing unfinished removes the directory; with turns open it stays for the next start', () => {
    const empty = ReplyJournal.open(root);
    empty.close();
    expect(readdirSync(root)).toEqual([]);

    const busy = ReplyJournal.open(root);
    busy.open(turn('open'));
    busy.close();
    const [dir] = readdirSync(root);
    expect(readdirSync(join(root, dir))).toEqual(['replies.jsonl']);
    appendFileSync(join(root, dir, 'replies.jsonl'), '');
    expect(ReplyJournal.open(root).unfinished.map((entry) => entry.reply.id)).toEqual(['open']);
  });

  test("the text of one turn of the event loop, every stream's, is written in one write at its end; those waiting are told then", async () => {
    const disk = countedWrites();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines });
    journal.open(turn('a'));
    journal.open(turn('b'));
    expect(journal.whenWritten(() => undefined)).toBe(false);
    const before = disk.writes.length;
    journal.delivered('a', 'Resting heart rate ');
    journal.delivered('b', 'Blood pressure ');
    journal.delivered('a', 'is 48 bpm.');
    const told: unknown[] = [];
    expect(journal.whenWritten((error) => told.push(error ?? 'written'))).toBe(true);
    const file = join(root, readdirSync(root)[0], 'replies.jsonl');
    expect(readUnfinished(readFileSync(file, 'utf8')).map((entry) => entry.delivered)).toEqual(['', '']);
    expect(told).toEqual([]);

    await endOfLoopTurn();
    expect(disk.writes.length - before).toBe(1);
    expect(told).toEqual(['written']);
    expect(readUnfinished(readFileSync(file, 'utf8')).map((entry) => entry.delivered)).toEqual(['Resting heart rate is 48 bpm.', 'Blood pressure ']);
  });

  test('an entry of another kind, and writeWaiting, write the waiting text at once, before it, in one write', () => {
    const disk = countedWrites();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines });
    journal.open(turn('a'));
    journal.open(turn('b'));
    const before = disk.writes.length;
    journal.delivered('a', 'first');
    journal.closed('a');
    expect(disk.writes.length - before).toBe(0);
    journal.open(turn('c'));
    journal.closed('c');
    expect(disk.writes.length - before).toBe(1);
    expect(disk.writes.at(-1)?.split('\n').map((line) => (line ? JSON.parse(line).op : ''))).toEqual(['text', 'closed', 'open', '']);

    let told = false;
    journal.delivered('b', 'second');
    journal.whenWritten(() => {
      told = true;
    });
    journal.writeWaiting();
    expect(told).toBe(true);
    const file = join(root, readdirSync(root)[0], 'replies.jsonl');
    expect(readUnfinished(readFileSync(file, 'utf8')).map((entry) => [entry.reply.id, entry.delivered])).toEqual([['b', 'second']]);
  });

  test("closed turns' lines take no write of their own: they go with the next line written, or within the wait when nothing else is; one a crash kept out is found again, its reply on record", async () => {
    const disk = countedWrites();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines, closedLinesWaitMs: 30 });
    for (const id of ['a', 'b', 'c', 'd']) journal.open(turn(id));
    const before = disk.writes.length;
    journal.closed('a');
    journal.closed('b');
    await endOfLoopTurn();
    expect(disk.writes.length - before).toBe(0);
    // Under load the next turn's `open` line carries them: one write for all three.
    journal.open(turn('e'));
    expect(disk.writes.length - before).toBe(1);
    expect(disk.writes.at(-1)?.split('\n').filter(Boolean).map((line) => [JSON.parse(line).op, JSON.parse(line).id])).toEqual([
      ['closed', 'a'],
      ['closed', 'b'],
      ['open', 'e'],
    ]);
    // With nothing else to write, they go by themselves within the wait.
    journal.closed('c');
    journal.closed('e');
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(disk.writes.length - before).toBe(2);
    expect(disk.writes.at(-1)?.split('\n').filter(Boolean).map((line) => JSON.parse(line).id)).toEqual(['c', 'e']);

    // The process dies before its last `closed` line is written: the next start finds that turn unfinished, and
    // reply-records.ts writes no reply where one is stored.
    journal.closed('d');
    const next = ReplyJournal.open(root);
    expect(next.unfinished.map((entry) => entry.reply.id)).toEqual(['d']);
  });

  test('close() writes the closed lines still waiting: the next start finds only the turns left open', () => {
    const journal = ReplyJournal.open(root, { closedLinesWaitMs: 60_000 });
    journal.open(turn('a'));
    journal.open(turn('b'));
    journal.delivered('a', 'all of it');
    journal.delivered('b', 'part');
    journal.closed('a');
    journal.close();
    const next = ReplyJournal.open(root);
    expect(next.unfinished.map((entry) => [entry.reply.id, entry.delivered])).toEqual([['b', 'part']]);
  });

  test('a write that fails is told to those waiting for its text, and thrown to the caller of an append', async () => {
    const disk = countedWrites();
    const journal = ReplyJournal.open(root, { writeLines: disk.writeLines });
    journal.open(turn('a'));
    disk.failing = true;
    journal.delivered('a', 'lost');
    const told: unknown[] = [];
    journal.whenWritten((error) => told.push(error));
    await endOfLoopTurn();
    expect(told).toHaveLength(1);
    expect((told[0] as Error).message).toMatch(/ENOSPC/);

    journal.delivered('a', 'also lost');
    expect(() => journal.open(turn('b'))).toThrow(/ENOSPC/);
    disk.failing = false;
    journal.delivered('a', 'kept');
    journal.writeWaiting();
    const file = join(root, readdirSync(root)[0], 'replies.jsonl');
    expect(readUnfinished(readFileSync(file, 'utf8')).map((entry) => entry.delivered)).toEqual(['kept']);
  });

  test('without a directory it keeps nothing on disk and recovers nothing', async () => {
    // Run from an empty working directory, so a folder made relative to it would show; every line it would write is
    // counted, wherever it went.
    const cwd = process.cwd();
    process.chdir(root);
    try {
      const disk = countedWrites();
      const journal = ReplyJournal.open(undefined, { writeLines: disk.writeLines });
      journal.open(turn('a'));
      journal.delivered('a', 'text');
      await endOfLoopTurn();
      expect(readdirSync(root)).toEqual([]);
      expect(disk.writes).toEqual([]);
      // Nothing to wait for: a stream's text goes out at once.
      expect(journal.whenWritten(() => undefined)).toBe(false);
      expect(journal.unfinished).toEqual([]);
      // No close(): the process died with the turn open. The next start finds nothing of it.
      expect(ReplyJournal.open(undefined).unfinished).toEqual([]);
      expect(readdirSync(root)).toEqual([]);
    } finally {
      process.chdir(cwd);
    }
  });
});
