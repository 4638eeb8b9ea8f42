import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStandaloneStore, STORE_FILE_NAME } from '../open-store.ts';

const modeOf = (path: string): number => statSync(path).mode & 0o777;

describe('the store files are owner-only', () => {
  let scratch: string;
  let umask: number;

  beforeEach(() => {
    scratch = mkdtempSync(join(tmpdir(), 'fhirgate-owner-only-'));
    // The most permissive umask: whatever the modes are, the store set them, not the environment.
    umask = process.umask(0o000);
  });

  afterEach(() => {
    process.umask(umask);
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a store opened in a data folder that does not exist yet: folders 0700, the database and its WAL files 0600', async () => {
    const dataDir = join(scratch, 'new', 'data');
    const store = openStandaloneStore(dataDir);
    try {
      await store.createResource({ resourceType: 'Patient', name: [{ family: 'Private' }] });
      const path = join(dataDir, STORE_FILE_NAME);
      expect([modeOf(join(scratch, 'new')), modeOf(dataDir)]).toEqual([0o700, 0o700]);
      expect([path, `${path}-wal`, `${path}-shm`].map((file) => [file.slice(dataDir.length), existsSync(file) && modeOf(file)])).toEqual([
        [`/${STORE_FILE_NAME}`, 0o600],
        [`/${STORE_FILE_NAME}-wal`, 0o600],
        [`/${STORE_FILE_NAME}-shm`, 0o600],
      ]);
    } finally {
      store.close();
    }
  });

  test('a store file an earlier version left readable by everyone is narrowed to 0600 when it is opened', () => {
    openStandaloneStore(scratch).close();
    const path = join(scratch, STORE_FILE_NAME);
    chmodSync(path, 0o644);
    writeFileSync(`${path}-wal`, '', { mode: 0o644 });
    openStandaloneStore(scratch).close();
    expect(modeOf(path)).toBe(0o600);
    expect(existsSync(`${path}-wal`) ? modeOf(`${path}-wal`) : 0o600).toBe(0o600);
  });
});
