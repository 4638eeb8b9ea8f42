import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOCK_FILE_NAME, lockDataFolder, type DataFolderLock } from './data-folder-lock.ts';
import { readHostInfo } from './host-info.ts';

describe('lockDataFolder', () => {
  let dataDir: string;
  const held: DataFolderLock[] = [];
  const take = (shared = false): DataFolderLock => {
    const lock = lockDataFolder(dataDir, { shared });
    held.push(lock);
    return lock;
  };

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-folder-lock-'));
  });

  afterEach(async () => {
    held.splice(0).forEach((lock) => lock.release());
    await rm(dataDir, { recursive: true, force: true });
  });

  test('a second host is refused the folder, in one line naming the folder, the holder and what to do', () => {
    take().recordHost({ issuer: 'http://first.test/', url: 'http://127.0.0.1:8103/' });

    expect(() => take()).toThrow(
      expect.objectContaining({
        name: 'StartUpError',
        message: `the data folder ${dataDir} is in use by fhirgate, pid ${process.pid}, listening on http://127.0.0.1:8103/. Stop it, or give this one a data folder of its own (FHIRGATE_DATA_DIR=<folder>).`,
      })
    );
    expect(() => take(true)).toThrow(/holds it alone \(started without FHIRGATE_SHARED_DATA_DIR=on\)/);
    // The holder's record is untouched by the hosts it refused.
    expect(readHostInfo(dataDir)).toMatchObject({ issuer: 'http://first.test/', pid: process.pid, shared: false });
  });

  test('instances that share the folder hold it together, and keep out a host that wants it alone', () => {
    take(true).recordHost({ issuer: 'http://public.test/' });
    take(true);

    expect(() => take()).toThrow(/in use by fhirgate instances that share it .* Start this one with FHIRGATE_SHARED_DATA_DIR=on to be one of them/);
    held.splice(0).forEach((lock) => lock.release());
    expect(() => take()).not.toThrow();
  });

  test('the folder of a process that is gone (SIGKILL) is taken over at once', async () => {
    const holder = spawn(
      process.execPath,
      ['--input-type=module', '-e', `import { lockDataFolder } from ${JSON.stringify(new URL('./data-folder-lock.ts', import.meta.url).pathname)}; lockDataFolder(${JSON.stringify(dataDir)}).recordHost({ issuer: 'http://gone.test/' }); console.log('held'); setInterval(() => {}, 1000);`],
      { stdio: ['ignore', 'pipe', 'inherit'] }
    );
    await new Promise((resolve) => holder.stdout?.once('data', resolve));
    expect(() => take()).toThrow(new RegExp(`pid ${holder.pid}, starting`));

    const exited = new Promise((resolve) => holder.once('exit', resolve));
    holder.kill('SIGKILL');
    await exited;

    expect(() => take().recordHost({ issuer: 'http://next.test/' })).not.toThrow();
    expect(readHostInfo(dataDir)).toMatchObject({ issuer: 'http://next.test/', pid: process.pid });
  });

  test('a start that fails leaves host.json as it found it; a clean stop keeps its record; the lock file is owner-only', () => {
    writeFileSync(join(dataDir, 'host.json'), '{"issuer":"http://earlier.test/","url":"http://127.0.0.1:8103/","pid":1}\n');
    const failed = take();
    failed.recordHost({ issuer: 'http://failed.test/' });
    failed.releaseAfterFailedStart();
    expect(readHostInfo(dataDir)).toMatchObject({ issuer: 'http://earlier.test/', pid: 1 });

    const started = take();
    started.recordHost({ issuer: 'http://started.test/', url: 'http://127.0.0.1:8104/' });
    started.release();
    expect(readHostInfo(dataDir)).toMatchObject({ issuer: 'http://started.test/', url: 'http://127.0.0.1:8104/' });
    expect(JSON.parse(readFileSync(join(dataDir, 'host.json'), 'utf8'))).toMatchObject({ pid: process.pid });
    // No rollback journal beside the lock: nothing is ever written to it.
    expect(existsSync(join(dataDir, `${LOCK_FILE_NAME}-journal`))).toBe(false);
    expect(readFileSync(join(dataDir, LOCK_FILE_NAME)).length).toBe(0);
    expect(statSync(join(dataDir, LOCK_FILE_NAME)).mode & 0o077).toBe(0);
    expect(statSync(join(dataDir, 'host.json')).mode & 0o077).toBe(0);
  });
});
