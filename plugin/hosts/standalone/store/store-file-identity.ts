/**
 * Whether a store's files are still the ones it opened. An open file outlives its name: when the data folder is
 * deleted (or the file replaced) while the host runs, SQLite goes on committing into files no path reaches any more,
 * and everything written from then on is gone at the next start. So the store compares, after each group's commit
 * and at each health check, the device and inode its paths name now with those it opened: the database file and its
 * write-ahead log (the commits not yet checkpointed live only there). Two `stat` calls, a few microseconds against
 * a commit's fsync of a millisecond or more.
 */
import { statSync } from 'node:fs';
import { AppError } from '../../../errors.ts';

interface Identity {
  readonly path: string;
  readonly device: bigint;
  readonly inode: bigint;
}

/** The files of one store, as they were when it opened them. */
export class StoreFileIdentity {
  readonly #files: readonly Identity[];

  private constructor(files: readonly Identity[]) {
    this.#files = files;
  }

  /** Records what `databasePath` and its `-wal` name now (open the database in WAL mode first: SQLite creates the log). */
  static of(databasePath: string): StoreFileIdentity {
    return new StoreFileIdentity(
      [databasePath, `${databasePath}-wal`].map((path) => {
        const stats = statSync(path, { bigint: true });
        return { path, device: stats.dev, inode: stats.ino };
      })
    );
  }

  /** Throws `unavailable` when a path names no file, or another file, than at the start. */
  check(): void {
    for (const file of this.#files) {
      const stats = statSync(file.path, { bigint: true, throwIfNoEntry: false });
      if (!stats || stats.dev !== file.device || stats.ino !== file.inode) {
        throw storeFileLost(stats ? 'replaced' : 'deleted');
      }
    }
  }
}

/** The refusal of every operation of a store whose file is gone: nothing it accepted from then on could be kept. */
export function storeFileLost(what: 'deleted' | 'replaced'): AppError {
  return new AppError('unavailable', `The FHIR store's file was ${what} while the server ran: it cannot keep anything more. The server must be restarted.`, {
    isRetryable: true,
  });
}
