import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseSearchRequest } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { STORE_SCHEMA_VERSION, openStoreDatabase } from './schema.ts';
import { readDatabaseFileAlone } from '../../../../test/support/database-file-alone.ts';
import { waitFor } from '../../../../test/support/wait-for.ts';
import { SqliteRepository } from './sqlite-repository.ts';

const execFileAsync = promisify(execFile);

let directory: string;
let path: string;
const opened: SqliteRepository[] = [];

function open(): SqliteRepository {
  const repository = SqliteRepository.open(path);
  opened.push(repository);
  return repository;
}

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-store-'));
  path = join(directory, 'store.sqlite');
});

afterEach(() => {
  for (const repository of opened.splice(0)) {
    repository.close();
  }
  rmSync(directory, { recursive: true, force: true });
});

const turn = (conversation: string): Communication => ({
  resourceType: 'Communication',
  status: 'completed',
  partOf: [{ reference: `Communication/${conversation}` }],
  meta: { project: 'p1' },
});

async function partOfTotal(repository: SqliteRepository, conversation: string, total: 'accurate' | 'estimate' = 'accurate'): Promise<number | undefined> {
  const bundle = await repository.search(parseSearchRequest(`Communication?part-of=Communication/${conversation}&_total=${total}`));
  return bundle.total;
}

describe('SqliteRepository on a file', () => {
  test('creates a versioned schema in WAL mode; connections sync fully unless told otherwise', () => {
    const database = openStoreDatabase(path);
    const relaxed = openStoreDatabase(path, { synchronous: 'NORMAL' });
    try {
      expect(database.prepare('PRAGMA user_version').get()?.user_version).toBe(STORE_SCHEMA_VERSION);
      expect(database.prepare('PRAGMA journal_mode').get()?.journal_mode).toBe('wal');
      expect(database.prepare('PRAGMA synchronous').get()?.synchronous).toBe(2); // FULL
      expect(relaxed.prepare('PRAGMA synchronous').get()?.synchronous).toBe(1); // NORMAL
    } finally {
      database.close();
      relaxed.close();
    }
  });

  test('keeps an 8 MiB page cache unless told another size', () => {
    const database = openStoreDatabase(path);
    const larger = openStoreDatabase(path, { cacheSizeMiB: 64 });
    try {
      // Negative: KiB.
      expect(database.prepare('PRAGMA cache_size').get()?.cache_size).toBe(-8 * 1024);
      expect(larger.prepare('PRAGMA cache_size').get()?.cache_size).toBe(-64 * 1024);
    } finally {
      database.close();
      larger.close();
    }
  });

  test('data, history and the search index survive close and reopen', async () => {
    const first = open();
    const created = await first.createResource(turn('c1'));
    const updated = await first.updateResource({ ...created, status: 'entered-in-error' as const });
    const deleted = await first.createResource(turn('c1'));
    await first.deleteResource('Communication', deleted.id);
    first.close();

    const reopened = open();
    expect(await reopened.readResource('Communication', created.id)).toEqual(updated);
    expect((await reopened.readHistory('Communication', created.id)).entry).toHaveLength(2);
    expect(await partOfTotal(reopened, 'c1')).toBe(1);
    await expect(reopened.readResource('Communication', deleted.id)).rejects.toThrow('Gone');
  });

  test('the log is checkpointed into the database file while the store stays open, and closing leaves no log', async () => {
    const repository = open();
    const created = await repository.createResource(turn('checkpointed'));
    // Before the first checkpoint the file does not even hold the schema.
    const inDatabaseFileAlone = (): boolean =>
      readDatabaseFileAlone(
        path,
        (alone) =>
          alone.prepare("SELECT 1 FROM sqlite_master WHERE name = 'resources'").get() !== undefined &&
          alone.prepare('SELECT 1 FROM resources WHERE id = ?').get(created.id) !== undefined
      );
    // Later commits bring the first checkpoint (after about 1,000 pages: some sixty writes); the worker copies the log.
    await waitFor(async () => {
      await repository.createResource(turn('more'));
      return inDatabaseFileAlone() ? true : undefined;
    }, 30_000);
    expect((await repository.readResource('Communication', created.id)).id).toBe(created.id);

    repository.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
  });

  test('two repositories on one file see each other’s writes', async () => {
    const first = open();
    const second = open();
    const fromFirst = await first.createResource(turn('shared'));
    expect((await second.readResource('Communication', fromFirst.id)).id).toBe(fromFirst.id);
    const fromSecond = await second.createResource(turn('shared'));
    expect(await partOfTotal(first, 'shared')).toBe(2);
    await second.updateResource({ ...fromFirst, status: 'stopped' as const });
    expect((await first.readResource<Communication>('Communication', fromFirst.id)).status).toBe('stopped');
    await first.deleteResource('Communication', fromSecond.id);
    expect(await partOfTotal(second, 'shared')).toBe(1);
  });

  test('a file indexed for another parameter list is re-indexed on open, and searches trust the rebuilt index', async () => {
    const first = open();
    const created = await first.createResource(turn('c2'));
    await first.createResource(turn('another'));
    await first.createResource(turn('another'));
    first.close();
    const database = new DatabaseSync(path);
    database.exec("DELETE FROM search_index; UPDATE store_info SET value = 'an older list' WHERE key = 'search_index_fingerprint'");
    database.close();

    const reopened = open();
    const found = await reopened.searchResources(parseSearchRequest('Communication?part-of=Communication/c2'));
    expect(found.map((resource) => resource.id)).toEqual([created.id]);
    // An estimate is counted from the index: the conversation's one turn, not every Communication (what a search
    // that did not trust the index would have to answer).
    expect(await partOfTotal(reopened, 'c2', 'estimate')).toBe(1);
    expect(await partOfTotal(reopened, 'another', 'estimate')).toBe(2);
  });

  test('a file another process re-indexes for another parameter list while this one has it open is not trusted by the next search', async () => {
    const first = open();
    const created = await first.createResource(turn('c3'));
    expect((await first.searchResources(parseSearchRequest('Communication?part-of=Communication/c3'))).map((resource) => resource.id)).toEqual([created.id]);
    // Another process, indexing other parameters, rebuilt the index: none of this one's rows are there.
    const other = new DatabaseSync(path);
    other.exec("DELETE FROM search_index; UPDATE store_info SET value = 'another list' WHERE key = 'search_index_fingerprint'");
    other.close();
    // The search does not take the empty index at its word: it reads the resources themselves.
    expect((await first.searchResources(parseSearchRequest('Communication?part-of=Communication/c3'))).map((resource) => resource.id)).toEqual([created.id]);
  });

  test('two processes writing the same file at once lose nothing', async () => {
    open(); // creates the file and its schema
    const moduleUrl = new URL('./sqlite-repository.ts', import.meta.url).href;
    const script = join(directory, 'writer.mjs');
    writeFileSync(
      script,
      `import { SqliteRepository } from ${JSON.stringify(moduleUrl)};
const repository = SqliteRepository.open(process.argv[2]);
for (let index = 0; index < 150; index++) {
  await repository.createResource({ resourceType: 'Communication', status: 'completed', partOf: [{ reference: 'Communication/race' }] });
}
repository.close();
`
    );
    const child = execFileAsync(process.execPath, [script, path], { cwd: fileURLToPath(new URL('.', import.meta.url)) });
    const repository = open();
    for (let index = 0; index < 150; index++) {
      await repository.createResource(turn('race'));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await child;
    expect(await partOfTotal(repository, 'race')).toBe(300);
  });
});
