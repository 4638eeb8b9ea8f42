import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { openStoreDatabase } from './schema.ts';
import { WalSync } from './wal-sync.ts';

let directory: string;
let path: string;
let database: DatabaseSync;

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-wal-sync-'));
  path = join(directory, 'store.sqlite');
  database = openStoreDatabase(path, { synchronous: 'NORMAL' });
});

afterEach(() => {
  database.close();
  rmSync(directory, { recursive: true, force: true });
});

describe('WalSync', () => {
  test('syncs the log of a WAL database, on the thread pool and blocking', async () => {
    const sync = WalSync.open(path);
    database.exec("INSERT INTO store_info (key, value) VALUES ('k', 'v')");
    await expect(sync.sync()).resolves.toBeUndefined();
    expect(() => sync.syncNow()).not.toThrow();
    sync.close();
  });

  test('closing while a sync runs lets that sync finish on its file', async () => {
    const sync = WalSync.open(path);
    const running = Promise.all([sync.sync(), sync.sync()]);
    sync.close();
    await expect(running).resolves.toEqual([undefined, undefined]);
    sync.close();
  });

  test('a database without its log (not opened in WAL mode) is refused when the store opens', () => {
    expect(() => WalSync.open(join(directory, 'missing.sqlite'))).toThrow(/ENOENT/);
  });
});
