import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { StoreDatabaseOptions } from './store/schema.ts';
import { SqliteRepository } from './store/sqlite-repository.ts';

/** The store of a standalone host: a FhirRepository on a SQLite file, closed when the host stops. */
export type StandaloneStore = SqliteRepository;

/** The SQLite file inside a data folder. */
export const STORE_FILE_NAME = 'fhirgate.sqlite';

/**
 * Opens (creating if needed) the store of a data folder; a folder it creates, and the store's files, are
 * owner-only (0700, 0600). `busyTimeoutMs`: how long a write waits for another process's lock; `cacheSizeMiB`:
 * SQLite's page cache.
 */
export function openStandaloneStore(dataDir: string, options: Pick<StoreDatabaseOptions, 'busyTimeoutMs' | 'cacheSizeMiB'> = {}): StandaloneStore {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  return SqliteRepository.open(join(dataDir, STORE_FILE_NAME), options);
}
