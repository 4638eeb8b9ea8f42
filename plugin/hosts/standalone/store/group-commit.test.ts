import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { AsyncMutex } from './async-mutex.ts';
import { GroupCommit, type GroupCommitOptions } from './group-commit.ts';
import { ResourceStore } from './resource-store.ts';
import { openStoreDatabase } from './schema.ts';
import { ControlledCheckpoint, ControlledSync } from '../../../../test/support/controlled-sync.ts';

let directory: string;
let path: string;
let database: DatabaseSync;
let store: ResourceStore;
let connection: AsyncMutex;
const readers: DatabaseSync[] = [];

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-group-commit-'));
  path = join(directory, 'store.sqlite');
  database = openStoreDatabase(path);
  store = new ResourceStore(database);
  connection = new AsyncMutex();
});

afterEach(() => {
  for (const reader of readers.splice(0)) {
    reader.close();
  }
  database.close();
  rmSync(directory, { recursive: true, force: true });
});

function groupCommit(options?: GroupCommitOptions): GroupCommit {
  return new GroupCommit(store, connection, options);
}

/** A write of one Patient row, as the repository would queue it. */
function insert(id: string): () => string {
  return () => {
    const content = JSON.stringify({ resourceType: 'Patient', id });
    const lastUpdated = '2026-01-01T00:00:00.000Z';
    store.insertVersion({ resourceType: 'Patient', id, versionId: `${id}-v1`, lastUpdated, project: undefined, content, indexRows: [] });
    return id;
  };
}

/** Another connection on the file: it sees only what was committed. */
function openReader(): DatabaseSync {
  const reader = new DatabaseSync(path, { readOnly: true });
  readers.push(reader);
  return reader;
}

function committedIds(reader: DatabaseSync): string[] {
  return reader.prepare('SELECT id FROM resources ORDER BY id').all().map((row) => String(row.id));
}

/** Lets the event loop finish this turn, so that a group scheduled with setImmediate has been flushed. */
async function nextTurn(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
}

describe('GroupCommit', () => {
  test('the writes of one event-loop turn are committed together, with one COMMIT', async () => {
    const group = groupCommit();
    const results = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => group.write(insert(id))));
    expect(results).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(store.commitCount).toBe(1);
    expect(committedIds(openReader())).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  test('a write runs and resolves only with its group: when it resolves, its COMMIT has returned', async () => {
    const group = groupCommit();
    const reader = openReader();
    const seenWhenResolved: { id: string; commits: number; committed: string[] }[] = [];
    const writes = ['a', 'b'].map((id) =>
      group.write(insert(id)).then((result) => {
        seenWhenResolved.push({ id: result, commits: store.commitCount, committed: committedIds(reader) });
      })
    );
    // Queued, not run: nothing is written, not even uncommitted on the writer's own connection.
    expect(group.pendingWrites).toBe(2);
    expect(database.prepare('SELECT count(*) AS n FROM resources').get()?.n).toBe(0);
    await Promise.all(writes);
    expect(seenWhenResolved).toEqual([
      { id: 'a', commits: 1, committed: ['a', 'b'] },
      { id: 'b', commits: 1, committed: ['a', 'b'] },
    ]);
  });

  test('a write that throws is rolled back alone; the rest of its group commits', async () => {
    const group = groupCommit();
    const failing = (): string => {
      insert('half-written')();
      throw new Error('failed after its first statement');
    };
    const results = await Promise.allSettled([group.write(insert('a')), group.write(failing), group.write(insert('c'))]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(store.commitCount).toBe(1);
    expect(committedIds(openReader())).toEqual(['a', 'c']);
  });

  test('a failing COMMIT rejects every write of the group and stores none of them', async () => {
    // A deferred foreign key is checked at COMMIT: a row that breaks it makes the COMMIT itself fail.
    database.exec(`
      PRAGMA foreign_keys = ON;
      CREATE TABLE parent (id INTEGER PRIMARY KEY);
      CREATE TABLE child (parent_id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
      CREATE TRIGGER poison AFTER INSERT ON resources WHEN NEW.id = 'poison' BEGIN INSERT INTO child VALUES (42); END;
    `);
    const group = groupCommit();
    const results = await Promise.allSettled(['a', 'poison', 'c'].map((id) => group.write(insert(id))));
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(String((results[0] as PromiseRejectedResult).reason)).toContain('FOREIGN KEY');
    expect(store.commitCount).toBe(0);
    expect(database.isTransaction).toBe(false);
    expect(committedIds(openReader())).toEqual([]);

    // The connection is usable again: the next group commits.
    expect(await group.write(insert('after'))).toBe('after');
    expect(committedIds(openReader())).toEqual(['after']);
  });

  test('when SQLite rolls the whole transaction back during a write, every write of the group fails', async () => {
    const group = groupCommit();
    const abortingTransaction = (): string => {
      database.exec('ROLLBACK'); // what SQLite does by itself on an I/O error or a full disk
      throw new Error('disk I/O error');
    };
    const results = await Promise.allSettled([group.write(insert('a')), group.write(abortingTransaction), group.write(insert('c'))]);
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(committedIds(openReader())).toEqual([]);
  });

  test('a group reaching maxWrites is committed at once; the next writes start a new group', async () => {
    const group = groupCommit({ maxWrites: 2 });
    const writes = ['a', 'b', 'c', 'd', 'e'].map((id) => group.write(insert(id)));
    expect(store.commitCount).toBe(2);
    await Promise.all(writes);
    expect(store.commitCount).toBe(3);
    expect(committedIds(openReader())).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  test('a group waits while a transaction holds the connection, then commits on its own', async () => {
    const group = groupCommit();
    const release = await connection.acquire();
    store.begin();
    insert('in-transaction')();
    const queued = group.write(insert('queued'));
    await nextTurn();
    await nextTurn();
    expect(group.pendingWrites).toBe(1);
    store.rollback();
    release();
    expect(await queued).toBe('queued');
    expect(committedIds(openReader())).toEqual(['queued']);
  });

  test('flushNow commits what is queued at once', async () => {
    const group = groupCommit();
    const queued = group.write(insert('a'));
    group.flushNow();
    expect(store.commitCount).toBe(1);
    expect(await queued).toBe('a');
  });
});

describe('GroupCommit with the sync off the event loop', () => {
  test('a write resolves only once the sync after its COMMIT returned', async () => {
    const sync = new ControlledSync();
    const group = groupCommit({ sync });
    let resolved = false;
    const write = group.write(insert('a')).then((id) => {
      resolved = true;
      return id;
    });
    await nextTurn();
    // Committed (another connection sees it), not yet acknowledged: it is not known to be on disk.
    expect(committedIds(openReader())).toEqual(['a']);
    expect(sync.pending).toHaveLength(1);
    expect(group.readable).toBe(false);
    await nextTurn();
    expect(resolved).toBe(false);
    sync.finish();
    expect(await write).toBe('a');
    expect(group.readable).toBe(true);
  });

  test('writes that arrive while a sync runs wait, then share one COMMIT and one sync', async () => {
    const sync = new ControlledSync();
    const group = groupCommit({ sync });
    const first = group.write(insert('a'));
    await nextTurn();
    const later = ['b', 'c', 'd'].map((id) => group.write(insert(id)));
    await nextTurn();
    await nextTurn();
    expect(store.commitCount).toBe(1);
    expect(group.pendingWrites).toBe(3);
    sync.finish();
    await first;
    await nextTurn();
    expect(store.commitCount).toBe(2);
    expect(sync.pending).toHaveLength(1);
    sync.finish();
    expect(await Promise.all(later)).toEqual(['b', 'c', 'd']);
  });

  test('a due checkpoint runs once a group is synced; the next group waits for it, reads do not', async () => {
    const sync = new ControlledSync();
    const checkpoint = new ControlledCheckpoint();
    const group = groupCommit({ sync, checkpoint });
    const first = group.write(insert('a'));
    await nextTurn();
    expect(checkpoint.commits).toBe(1);
    checkpoint.isDue = true;
    sync.finish();
    expect(await first).toBe('a');
    expect(checkpoint.running).toHaveLength(1);

    const second = group.write(insert('b'));
    await nextTurn();
    await nextTurn();
    expect(store.commitCount).toBe(1);
    expect(group.pendingWrites).toBe(1);
    // Reads go on while the checkpoint runs: it changes nothing they see.
    expect(group.readable).toBe(true);

    checkpoint.finish();
    await nextTurn();
    await nextTurn();
    expect(store.commitCount).toBe(2);
    expect(checkpoint.commits).toBe(2);
    sync.finish();
    expect(await second).toBe('b');
  });

  test('no checkpoint runs while it is not due, and none after a failed sync', async () => {
    const sync = new ControlledSync();
    const checkpoint = new ControlledCheckpoint();
    const group = groupCommit({ sync, checkpoint });
    const first = group.write(insert('a'));
    await nextTurn();
    sync.finish();
    await first;
    expect(checkpoint.running).toHaveLength(0);

    const second = group.write(insert('b'));
    await nextTurn();
    checkpoint.isDue = true;
    sync.finish(new Error('EIO'));
    await expect(second).rejects.toThrow('EIO');
    expect(checkpoint.running).toHaveLength(0);
  });

  test('a read waiting in whenSynced runs before the next group commits: it sees only synced rows', async () => {
    const sync = new ControlledSync();
    const group = groupCommit({ sync });
    const first = group.write(insert('a'));
    await nextTurn();
    const seen: string[][] = [];
    const read = (async () => {
      while (!group.readable) {
        await group.whenSynced();
      }
      seen.push(database.prepare('SELECT id FROM resources ORDER BY id').all().map((row) => String(row.id)));
    })();
    const second = group.write(insert('b'));
    await nextTurn();
    expect(seen).toEqual([]);
    sync.finish();
    await read;
    await first;
    expect(seen).toEqual([['a']]);
    await nextTurn();
    sync.finish();
    expect(await second).toBe('b');
  });

  test('a failed sync fails its writes, the writes waiting behind it and every later one; reads are refused', async () => {
    const sync = new ControlledSync();
    const group = groupCommit({ sync });
    const first = group.write(insert('a'));
    await nextTurn();
    const waiting = group.write(insert('b'));
    sync.finish(new Error('EIO: i/o error, fdatasync'));
    await expect(first).rejects.toThrow('fdatasync');
    await expect(waiting).rejects.toThrow('fdatasync');
    await expect(group.write(insert('c'))).rejects.toThrow('fdatasync');
    expect(group.readable).toBe(false);
    await expect(group.whenSynced()).rejects.toThrow('fdatasync');
    // Nothing after the failure reached the database.
    expect(committedIds(openReader())).toEqual(['a']);
  });

  test('flushNow (closing) commits and syncs before it returns, even while a sync runs', async () => {
    const sync = new ControlledSync();
    const group = groupCommit({ sync });
    const first = group.write(insert('a'));
    await nextTurn();
    const queued = group.write(insert('b'));
    group.flushNow();
    expect(sync.blockingSyncs).toBe(1);
    expect(await queued).toBe('b');
    sync.finish();
    expect(await first).toBe('a');
    expect(committedIds(openReader())).toEqual(['a', 'b']);
  });
});

describe('GroupCommit with a verify (the store file still where it was opened)', () => {
  test('a group committed into a file that is gone is not acknowledged, and nothing after it is', async () => {
    let gone: Error | undefined;
    const group = groupCommit({
      verify: () => {
        if (gone) throw gone;
      },
    });
    await expect(group.write(insert('kept'))).resolves.toBe('kept');

    gone = new Error('the file was deleted');
    const failed = await Promise.allSettled(['a', 'b'].map((id) => group.write(insert(id))));
    expect(failed.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    // For good: the file may come back under its name (another process made a new one); this store stays refused.
    gone = undefined;
    await expect(group.write(insert('c'))).rejects.toThrow('the file was deleted');
    await expect(group.whenSynced()).rejects.toThrow('the file was deleted');
  });

  test('with a sync, the check runs once the group is durable, before any write of it resolves', async () => {
    const sync = new ControlledSync();
    let gone: Error | undefined;
    const group = groupCommit({
      sync,
      verify: () => {
        if (gone) throw gone;
      },
    });
    const write = group.write(insert('a'));
    await nextTurn();
    // Deleted while the group's fdatasync runs: the write it carried is refused.
    gone = new Error('deleted during the sync');
    sync.finish();
    await expect(write).rejects.toThrow('deleted during the sync');
  });

  test('fail() refuses every later operation for good, as a failed sync does', async () => {
    const group = groupCommit();
    group.fail(new Error('lost'));
    await expect(group.write(insert('a'))).rejects.toThrow('lost');
    expect(group.readable).toBe(false);
  });
});
