/**
 * Group commit as the repository's callers see it: concurrent writes share one COMMIT, each resolves once it is
 * durable (visible to another connection on the file), failures stay with their own write, and withTransaction
 * keeps its atomicity and isolation among grouped writes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { TransactionOptions } from '@medplum/fhir-router';
import type { Communication } from '@medplum/fhirtypes';
import { SqliteRepository } from './sqlite-repository.ts';
import { ControlledSync } from '../../../../test/support/controlled-sync.ts';
import { refusalOf, statusOf } from '../../../../test/support/rejection-status.ts';
import { failWritesMidway } from '../../../../test/support/midway-write-failure.ts';

let directory: string;
let path: string;
const opened: { close(): void }[] = [];

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-group-'));
  path = join(directory, 'store.sqlite');
});

afterEach(() => {
  for (const resource of opened.splice(0)) {
    resource.close();
  }
  rmSync(directory, { recursive: true, force: true });
});

function open(): SqliteRepository {
  const repository = SqliteRepository.open(path);
  opened.push(repository);
  return repository;
}

/** Another connection on the file: what it sees was committed. */
function committedIds(): string[] {
  const reader = new DatabaseSync(path, { readOnly: true });
  try {
    return reader.prepare("SELECT id FROM resources WHERE resource_type = 'Communication' ORDER BY id").all().map((row) => String(row.id));
  } finally {
    reader.close();
  }
}

/** A transaction that writes the turn `inside`, then holds the connection until `mayCommit()`. */
function heldTransaction(repository: SqliteRepository): { readonly transaction: Promise<void>; readonly mayCommit: () => void } {
  let mayCommit!: () => void;
  const gate = new Promise<void>((resolve) => {
    mayCommit = resolve;
  });
  const transaction = repository.withTransaction(async (inside) => {
    await inside.createResource(turn('inside'), { assignedId: true });
    await gate;
  });
  return { transaction, mayCommit };
}

function turn(id: string, conversation = 'c1'): Communication {
  return { resourceType: 'Communication', id, status: 'completed', partOf: [{ reference: `Communication/${conversation}` }] };
}


describe('SqliteRepository group commit', () => {
  test('concurrent writes of several requests are committed with one COMMIT', async () => {
    const repository = open();
    const before = repository.commitCount;
    const existing = await repository.createResource(turn('existing'), { assignedId: true });
    expect(repository.commitCount).toBe(before + 1);

    await Promise.all([
      ...['a', 'b', 'c', 'd'].map((id) => repository.createResource(turn(id), { assignedId: true })),
      repository.updateResource({ ...existing, status: 'stopped' as const }),
    ]);
    expect(repository.commitCount).toBe(before + 2);
    expect(committedIds()).toEqual(['a', 'b', 'c', 'd', 'existing']);
    expect((await repository.readResource<Communication>('Communication', 'existing')).status).toBe('stopped');
  });

  test('each write resolves only once its COMMIT returned: another connection already sees it', async () => {
    const repository = open();
    const seen: string[][] = [];
    await Promise.all(
      ['a', 'b', 'c'].map((id) =>
        repository.createResource(turn(id), { assignedId: true }).then(() => {
          seen.push(committedIds());
        })
      )
    );
    expect(seen).toEqual([
      ['a', 'b', 'c'],
      ['a', 'b', 'c'],
      ['a', 'b', 'c'],
    ]);
  });

  test('a failing write does not affect the others of its group', async () => {
    const repository = open();
    await repository.createResource(turn('taken'), { assignedId: true });
    const before = repository.commitCount;
    // 'half' fails after its resource row is written: only its own rollback takes that row away.
    failWritesMidway(path, 'half');
    const [first, duplicate, half, stale, last] = [
      repository.createResource(turn('first'), { assignedId: true }),
      repository.createResource(turn('taken'), { assignedId: true }),
      repository.createResource(turn('half'), { assignedId: true }),
      repository.updateResource(turn('taken'), { ifMatch: 'not-the-current-version' }),
      repository.createResource(turn('last'), { assignedId: true }),
    ];
    expect(await statusOf(duplicate)).toBe(400);
    expect(await statusOf(half)).toBe(500);
    expect(await statusOf(stale)).toBe(412);
    expect((await first).id).toBe('first');
    expect((await last).id).toBe('last');
    expect(repository.commitCount).toBe(before + 1);
    expect(committedIds()).toEqual(['first', 'last', 'taken']);
    expect(await statusOf(repository.readResource('Communication', 'half'))).toBe(404);
  });

  test('withTransaction stays atomic and isolated among grouped writes', async () => {
    const repository = open();
    const options: TransactionOptions = { resourceTypes: ['Communication'] };
    let rootWritten!: () => void;
    const rootIsWritten = new Promise<void>((resolve) => {
      rootWritten = resolve;
    });
    let mayContinue!: () => void;
    const gate = new Promise<void>((resolve) => {
      mayContinue = resolve;
    });
    const writes = Promise.allSettled([
      repository.createResource(turn('before'), { assignedId: true }),
      repository.withTransaction(async (transaction) => {
        await transaction.createResource(turn('failed-root'), { assignedId: true });
        rootWritten();
        await gate;
        await transaction.createResource(turn('failed-prompt'), { assignedId: true });
        throw new Error('the prompt could not be recorded');
      }, options),
      repository.createResource(turn('during'), { assignedId: true }),
      repository.withTransaction(async (transaction) => {
        const root = await transaction.createResource(turn('root'), { assignedId: true });
        const prompt = await transaction.createResource(turn('prompt', root.id), { assignedId: true });
        // Inside the transaction, its own writes are visible before it commits.
        expect((await transaction.readResource('Communication', root.id)).id).toBe('root');
        return prompt.id;
      }, options),
      repository.createResource(turn('after'), { assignedId: true }),
    ]);
    await rootIsWritten;
    // A read from outside while the transaction holds an uncommitted row waits for it and never sees that row.
    const readFromOutside = repository.searchResources({ resourceType: 'Communication' });
    mayContinue();
    const results = await writes;
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(committedIds()).toEqual(['after', 'before', 'during', 'prompt', 'root']);
    expect((await readFromOutside).map((resource) => resource.id)).not.toContain('failed-root');
  });

  test('reads after a resolved write see it, on the same repository and on another one', async () => {
    const repository = open();
    const other = open();
    const created = await repository.createResource(turn('a'));
    expect((await repository.readResource('Communication', created.id)).id).toBe(created.id);
    expect((await other.readResource('Communication', created.id)).id).toBe(created.id);
    const updated = await repository.updateResource({ ...created, status: 'stopped' as const });
    expect(await other.readResource('Communication', created.id)).toEqual(updated);
  });

  test('the resource passed in may change after the call: what is stored is what was passed', async () => {
    const repository = open();
    const resource = turn('a');
    const created = repository.createResource(resource, { assignedId: true });
    resource.status = 'entered-in-error';
    expect((await created).status).toBe('completed');
    expect((await repository.readResource<Communication>('Communication', 'a')).status).toBe('completed');
  });

  test('close commits the writes still waiting for their group', async () => {
    const repository = open();
    const pending = repository.createResource(turn('a'), { assignedId: true });
    repository.close();
    expect((await pending).id).toBe('a');
    expect(committedIds()).toEqual(['a']);
  });

  test('a read asked just before close answers, and close still commits the writes waiting for their group', async () => {
    const repository = open();
    await repository.createResource(turn('before'), { assignedId: true });
    const pending = repository.createResource(turn('a'), { assignedId: true });
    // A read that nothing holds back does not take the connection: close finds it free and commits the group.
    const read = repository.readResource<Communication>('Communication', 'before');
    repository.close();
    expect((await pending).id).toBe('a');
    expect(committedIds()).toEqual(['a', 'before']);
    expect((await read).id).toBe('before');
  });
});

describe('SqliteRepository with the log synced off the event loop', () => {
  function openWith(sync: ControlledSync): SqliteRepository {
    const repository = SqliteRepository.open(path, { groupCommit: { sync } });
    opened.push(repository);
    return repository;
  }

  test('a read that starts while a commit waits for its sync answers only once the sync returned', async () => {
    const sync = new ControlledSync();
    const repository = openWith(sync);
    const write = repository.createResource(turn('a'), { assignedId: true });
    await new Promise((resolve) => setImmediate(resolve));
    expect(committedIds()).toEqual(['a']);
    let answered = false;
    const read = repository.searchResources({ resourceType: 'Communication' }).then((found) => {
      answered = true;
      return found.map((resource) => resource.id);
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    sync.finish();
    expect(await read).toEqual(['a']);
    expect((await write).id).toBe('a');
  });

  test('a failed sync answers the write and every later read and write with a 500 that does not quote the disk', async () => {
    const sync = new ControlledSync();
    const repository = openWith(sync);
    const write = repository.createResource(turn('a'), { assignedId: true });
    await new Promise((resolve) => setImmediate(resolve));
    sync.finish(new Error('EIO: i/o error, fdatasync'));
    expect(await statusOf(write)).toBe(500);
    expect(await statusOf(repository.readResource('Communication', 'a'))).toBe(500);
    expect(await statusOf(repository.createResource(turn('b'), { assignedId: true }))).toBe(500);
    const refusal: unknown = await repository.readResource('Communication', 'a').then(
      () => undefined,
      (error: unknown) => error
    );
    expect(refusal).toBeDefined();
    expect(String(refusal)).not.toContain('fdatasync');
  });

  test('a read queued behind a transaction and a group of writes sees that group only once its sync returned', async () => {
    const sync = new ControlledSync();
    const repository = openWith(sync);
    const { transaction, mayCommit } = heldTransaction(repository);
    await new Promise((resolve) => setImmediate(resolve));
    // Both wait for the connection: the write's group commits once the transaction released it, then the read runs.
    const write = repository.createResource(turn('outside'), { assignedId: true });
    let answered = false;
    const read = repository.readResource<Communication>('Communication', 'outside').then((found) => {
      answered = true;
      return found.id;
    });
    mayCommit();
    await new Promise((resolve) => setImmediate(resolve));
    sync.finish(); // the transaction's COMMIT
    await transaction;
    await new Promise((resolve) => setImmediate(resolve));
    // The group is committed, its sync has not returned: the read waits for it.
    expect(committedIds()).toEqual(['inside', 'outside']);
    expect(answered).toBe(false);
    sync.finish();
    expect(await read).toBe('outside');
    expect((await write).id).toBe('outside');
  });

  test('withTransaction whose COMMIT fails to sync rejects with a 500, and so does every later operation', async () => {
    const sync = new ControlledSync();
    const repository = openWith(sync);
    const transaction = repository.withTransaction(async (inside) => (await inside.createResource(turn('root'), { assignedId: true })).id);
    await new Promise((resolve) => setImmediate(resolve));
    sync.finish(new Error('EIO: i/o error, fdatasync'));
    expect(await refusalOf(transaction)).toEqual({ status: 500, text: 'Internal server error' });
    expect(await statusOf(repository.readResource('Communication', 'root'))).toBe(500);
  });

  test('withTransaction resolves once its COMMIT is synced', async () => {
    const sync = new ControlledSync();
    const repository = openWith(sync);
    let resolved = false;
    const transaction = repository
      .withTransaction(async (inside) => (await inside.createResource(turn('root'), { assignedId: true })).id)
      .then((id) => {
        resolved = true;
        return id;
      });
    await new Promise((resolve) => setImmediate(resolve));
    expect(committedIds()).toEqual(['root']);
    expect(resolved).toBe(false);
    sync.finish();
    expect(await transaction).toBe('root');
  });
});

describe('SqliteRepository reads behind a transaction', () => {
  test('several reads waiting behind a transaction all answer once it ends', async () => {
    const repository = open();
    await repository.createResource(turn('before'), { assignedId: true });
    const { transaction, mayCommit } = heldTransaction(repository);
    await new Promise((resolve) => setImmediate(resolve));
    const reads = Array.from({ length: 5 }, () => repository.searchResources({ resourceType: 'Communication' }));
    mayCommit();
    await transaction;
    for (const found of await Promise.all(reads)) {
      expect(found.map((resource) => resource.id).sort()).toEqual(['before', 'inside']);
    }
  });
});
