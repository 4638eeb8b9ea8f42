/**
 * The store file holds signing keys, client secrets and PHI: only its owner may read it. SQLite creates a new
 * database with the process's umask (usually 0644, readable by every local user) and gives its `-wal` and `-shm`
 * files the database file's mode, so the file is made (or, from an earlier version, narrowed to) 0600 before
 * SQLite opens it.
 */
import { chmodSync, closeSync, existsSync, openSync, statSync } from 'node:fs';

/** Mode of every file the store and the reply journal write: read and write for the owner only. */
export const OWNER_ONLY_FILE_MODE = 0o600;

/** True when `path` names a database file of its own (not ':memory:', a temporary database or a URI). */
export function isDatabaseFilePath(path: string): boolean {
  return path !== '' && path !== ':memory:' && !path.startsWith('file:');
}

/** Creates `path` owner-only if it is missing, and narrows it and its WAL files to owner-only if they are not. */
export function prepareOwnerOnlyDatabaseFile(path: string): void {
  if (!isDatabaseFilePath(path)) {
    return;
  }
  closeSync(openSync(path, 'a', OWNER_ONLY_FILE_MODE));
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    if (existsSync(file) && (statSync(file).mode & 0o077) !== 0) {
      chmodSync(file, OWNER_ONLY_FILE_MODE);
    }
  }
}
