import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { readDatabaseFileAlone } from '../../../../test/support/database-file-alone.ts';
import { openStoreDatabase } from './schema.ts';
import { WalCheckpointer } from './wal-checkpointer.ts';

let directory: string;
let path: string;
let database: DatabaseSync;
const checkpointers: WalCheckpointer[] = [];

function checkpointer(options: ConstructorParameters<typeof WalCheckpointer>[1] = {}): WalCheckpointer {
  const created = new WalCheckpointer(path, options);
  checkpointers.push(created);
  return created;
}

/** The keys the database file alone holds, without its log. */
function keysInDatabaseFileAlone(): string[] {
  return readDatabaseFileAlone(path, (alone) =>
    alone.prepare("SELECT key FROM store_info WHERE key LIKE 'k%' ORDER BY key").all().map((row) => String(row.key))
  );
}

function insert(key: string): void {
  database.prepare('INSERT INTO store_info (key, value) VALUES (?, ?)').run(key, 'v');
}

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-wal-checkpointer-'));
  path = join(directory, 'store.sqlite');
  database = openStoreDatabase(path, { synchronous: 'NORMAL' });
  // The schema in the database file itself; from here on, only the checkpointer copies the log into it.
  database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  database.exec('PRAGMA wal_autocheckpoint = 0');
});

afterEach(() => {
  for (const created of checkpointers.splice(0)) {
    created.close();
  }
  if (database.isOpen) {
    database.close();
  }
  rmSync(directory, { recursive: true, force: true });
});

describe('WalCheckpointer', () => {
  test('copies the committed log into the database file, on its worker', async () => {
    insert('k1');
    insert('k2');
    expect(keysInDatabaseFileAlone()).toEqual([]);

    const worker = checkpointer();
    await worker.run();

    expect(worker.completed).toBe(1);
    expect(keysInDatabaseFileAlone()).toEqual(['k1', 'k2']);
    // The store's connection goes on writing; the next checkpoint copies the new rows, and the log starts over.
    insert('k3');
    await worker.run();
    expect(keysInDatabaseFileAlone()).toEqual(['k1', 'k2', 'k3']);
    const logBefore = statSync(`${path}-wal`).size;
    for (let index = 4; index < 40; index++) {
      insert(`k${index}`);
      await worker.run();
    }
    expect(worker.completed).toBe(38);
    expect(statSync(`${path}-wal`).size).toBe(logBefore);
  });

  test('runs one checkpoint at a time', async () => {
    const worker = checkpointer();
    insert('k1');
    const first = worker.run();
    expect(worker.due()).toBe(false);
    await Promise.all([first, worker.run(), worker.run()]);

    expect(worker.completed).toBe(1);
    expect(keysInDatabaseFileAlone()).toEqual(['k1']);
  });

  test('is due once about the given number of pages were committed since the last checkpoint, learnt from the log', async () => {
    const worker = checkpointer({ pagesBetween: 40 });
    expect(worker.due()).toBe(false);
    // Until a checkpoint has counted the log, a commit is taken for 16 pages.
    worker.noteCommit();
    expect(worker.due()).toBe(false);
    worker.noteCommit();
    worker.noteCommit();
    expect(worker.due()).toBe(true);

    // Ten commits of one small row each: the checkpoint finds about a page and a half of log per commit.
    for (let index = 0; index < 10; index++) {
      insert(`k${index}`);
      worker.noteCommit();
    }
    await worker.run();
    expect(worker.due()).toBe(false);
    const pagesPerCommit = (statSync(`${path}-wal`).size - 32) / (4096 + 24) / 13;
    const commitsForForty = Math.ceil(40 / pagesPerCommit);
    for (let index = 1; index < commitsForForty; index++) {
      worker.noteCommit();
    }
    expect(worker.due()).toBe(false);
    worker.noteCommit();
    expect(worker.due()).toBe(true);
  });

  test('a worker that cannot open the store reports it once and stops', async () => {
    const failures: Error[] = [];
    const worker = new WalCheckpointer(join(directory, 'missing', 'store.sqlite'), { onFailure: (error) => failures.push(error) });
    checkpointers.push(worker);
    await worker.run();
    await worker.run();

    expect(failures).toHaveLength(1);
    expect(failures[0].message).toMatch(/^WAL checkpoint failed: /);
    expect(worker.running).toBe(false);
    expect(worker.due()).toBe(false);
    expect(worker.completed).toBe(0);
  });

  test('close waits for the worker to close its connection, so the store closes last and removes its log', async () => {
    const worker = checkpointer();
    insert('k1');
    await worker.run();

    worker.close();
    database.close();

    expect(existsSync(`${path}-wal`)).toBe(false);
    expect(keysInDatabaseFileAlone()).toEqual(['k1']);
  });

  test('a checkpointer never asked to checkpoint starts no worker and closes at once', () => {
    const worker = checkpointer();
    worker.close();
    expect(worker.running).toBe(false);
    expect(worker.completed).toBe(0);
  });
});
