import { copyFileSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';

let copies = 0;

/**
 * Reads what a store's database file holds by itself, without its write-ahead log: a copy of the file alone, opened
 * read-only beside it, so what is still only in the log (not yet checkpointed) is not there.
 */
export function readDatabaseFileAlone<T>(path: string, read: (database: DatabaseSync) => T): T {
  const copy = `${path}.alone-${process.pid}-${copies++}`;
  copyFileSync(path, copy);
  const alone = new DatabaseSync(copy, { readOnly: true });
  try {
    return read(alone);
  } finally {
    alone.close();
    rmSync(copy, { force: true });
  }
}
