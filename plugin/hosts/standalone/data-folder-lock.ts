/**
 * One host per data folder. The store file is made for several processes (SQLite locks it for each write: the token
 * command, a backup), but what a host keeps beside it is its own: `host.json` (the issuer the token command signs
 * for), the reply journal's root. A second host on the same folder would overwrite `host.json` with its own issuer,
 * and every token printed from then on would be refused by the first.
 *
 * So a host takes its data folder before it opens anything in it: a lock of the operating system on
 * `<data dir>/host.lock`, an empty SQLite file held in a transaction for the life of the process (SQLite's own
 * `fcntl` locks: no native module, and the same on Linux and macOS). The kernel releases it when the process ends,
 * however it ends (a clean stop, a crash, SIGKILL, a container stopped), so a lock left by a process that is gone
 * is free and the next host takes it at once; a reused pid cannot fool it. The file itself stays: it means nothing
 * while no process holds its lock.
 *
 * Several instances of one deployment may share a folder (the same store, the same Redis, one public address):
 * each started with `FHIRGATE_SHARED_DATA_DIR=on` takes a shared lock, which any number may hold and which keeps out
 * a host that wants the folder for itself (and the other way round).
 */
import { closeSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { HOST_INFO_FILE_NAME, readHostInfo, type HostInfo } from './host-info.ts';
import { StartUpError } from './start-up-error.ts';

/** The file a host locks, inside its data folder. */
export const LOCK_FILE_NAME = 'host.lock';

// SQLite's result codes for a lock another connection holds.
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

// The connections holding the locks of this process: a connection that nothing references could be collected, and
// closing it would give the folder away while the host still runs.
const held = new Set<DatabaseSync>();

/** A data folder this process holds. */
export interface DataFolderLock {
  readonly dataDir: string;
  /** Held with other instances (`FHIRGATE_SHARED_DATA_DIR=on`), not alone. */
  readonly shared: boolean;
  /** Records this process as the folder's host in `host.json`: at once when it takes the folder, again once it listens. */
  recordHost(info: Pick<HostInfo, 'issuer' | 'url'>): void;
  /** Gives the folder back (a clean stop); `host.json` stays, for the token command. Once. */
  release(): void;
  /** Gives the folder back after a start that failed: `host.json` is put back as it was before this process took the folder. */
  releaseAfterFailedStart(): void;
}

/**
 * Takes `dataDir` (which must exist) for this process, alone or `shared` with other instances; throws a
 * StartUpError naming the folder and the host that holds it when it cannot.
 */
export function lockDataFolder(dataDir: string, options: { readonly shared?: boolean } = {}): DataFolderLock {
  const shared = options.shared ?? false;
  const path = join(dataDir, LOCK_FILE_NAME);
  // Owner-only, as every file of the folder.
  closeSync(openSync(path, 'a', 0o600));
  const database = new DatabaseSync(path, { timeout: 0 });
  try {
    // Nothing is ever written: no rollback journal file beside it.
    database.exec('PRAGMA journal_mode = MEMORY');
    if (shared) {
      // A read transaction holds SQLite's SHARED lock until it ends: any number of readers, no writer.
      database.exec('BEGIN');
      database.prepare('SELECT count(*) FROM sqlite_master').get();
    } else {
      database.exec('BEGIN EXCLUSIVE');
    }
  } catch (error) {
    database.close();
    if (isLockedByAnother(error)) {
      throw new StartUpError(describeRefusal(dataDir, shared), { cause: error });
    }
    throw error;
  }
  held.add(database);
  const infoFile = join(dataDir, HOST_INFO_FILE_NAME);
  const before = readText(infoFile);
  let written: string | undefined;
  let released = false;
  const release = (): void => {
    if (!released) {
      released = true;
      held.delete(database);
      database.close();
    }
  };
  return {
    dataDir,
    shared,
    recordHost: ({ issuer, url }) => {
      const info: HostInfo = { issuer, url, pid: process.pid, hostname: hostname(), shared };
      written = `${JSON.stringify(info)}\n`;
      writeAtomically(infoFile, written);
    },
    release,
    releaseAfterFailedStart: () => {
      // Another instance sharing the folder may have recorded itself meanwhile: then its record stays.
      if (written !== undefined && readText(infoFile) === written) {
        if (before === undefined) {
          rmSync(infoFile, { force: true });
        } else {
          writeAtomically(infoFile, before);
        }
      }
      release();
    },
  };
}

function isLockedByAnother(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null && 'errcode' in error ? (error as { errcode: unknown }).errcode : undefined;
  return code === SQLITE_BUSY || code === SQLITE_LOCKED;
}

/** One line: the folder, who holds it (as it recorded itself), and what to do. */
function describeRefusal(dataDir: string, wantShared: boolean): string {
  const holder = readHostInfo(dataDir);
  const who = holder ? describeHolder(holder) : 'another fhirgate host';
  const ownFolder = 'give this one a data folder of its own (FHIRGATE_DATA_DIR=<folder>)';
  if (holder?.shared && !wantShared) {
    return (
      `the data folder ${dataDir} is in use by fhirgate instances that share it (the last one started: ${who}). ` +
      `Start this one with FHIRGATE_SHARED_DATA_DIR=on to be one of them, or ${ownFolder}.`
    );
  }
  if (wantShared) {
    return `the data folder ${dataDir} is in use by ${who}, which holds it alone (started without FHIRGATE_SHARED_DATA_DIR=on). Stop it, or ${ownFolder}.`;
  }
  return `the data folder ${dataDir} is in use by ${who}. Stop it, or ${ownFolder}.`;
}

function describeHolder(holder: HostInfo): string {
  const machine = holder.hostname && holder.hostname !== hostname() ? ` on ${holder.hostname}` : '';
  return `fhirgate, pid ${holder.pid}${machine}, ${holder.url ? `listening on ${holder.url}` : 'starting'}`;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Readers (the token command) see the old file or the new one, never half of one. */
function writeAtomically(file: string, text: string): void {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, text, { mode: 0o600 });
  renameSync(temporary, file);
}
