/**
 * For the store's tests: a write that fails after it has written something, as a disk error midway does. A trigger,
 * added over another connection to the store's file, refuses the index rows of the resource `id`: by then the
 * write has already stored the resource's own row, so only a rollback of that write takes it away again. The
 * resource must have an index row (a Communication's `status`, or any resource's `meta.compartment`).
 */
import { DatabaseSync } from 'node:sqlite';

/** The message the refused write fails with (the store reports it as its own 500). */
const MIDWAY_FAILURE = 'the write failed midway';

/** Makes every write of resource `id` in the store at `path` fail after writing its resource row. */
export function failWritesMidway(path: string, id: string): void {
  const database = new DatabaseSync(path);
  try {
    database.exec(
      `CREATE TRIGGER fail_midway_${id.replace(/\W/g, '_')} BEFORE INSERT ON search_index ` +
        `WHEN (SELECT id FROM resources WHERE pk = NEW.resource_pk) = '${id.replace(/'/g, "''")}' ` +
        `BEGIN SELECT RAISE(ABORT, '${MIDWAY_FAILURE}'); END`
    );
  } finally {
    database.close();
  }
}

/** The resource rows, deleted or not, of `resourceType` in the store at `path`: what is there, written halfway or not. */
export function storedIds(path: string, resourceType: string): string[] {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return database.prepare('SELECT id FROM resources WHERE resource_type = ? ORDER BY id').all(resourceType).map((row) => String(row.id));
  } finally {
    database.close();
  }
}
