/**
 * Makes a store's commits durable off the event loop: `fdatasync` of the SQLite write-ahead log on libuv's thread
 * pool. The store runs SQLite with `synchronous=NORMAL` under WAL (a COMMIT appends its frames to the log and
 * returns without an fsync) and calls `sync()` after each COMMIT; a write is acknowledged only once the sync that
 * followed its COMMIT returned, so "acknowledged" still means "survives power loss", as with `synchronous=FULL`.
 * WAL frames carry chained checksums, so a power loss keeps a prefix of the commits: a synced commit keeps every
 * commit before it. Checkpoints run on a worker thread's own connection (wal-checkpointer.ts); at NORMAL SQLite
 * still syncs the log before copying it into the database, and the database after.
 */
import { closeSync, fdatasync, fdatasyncSync, openSync } from 'node:fs';

/** What the group commit needs to make its commits durable. */
export interface CommitSync {
  /** Resolves once every commit that returned before the call is on disk; rejects when the disk refuses. */
  sync(): Promise<void>;
  /** The same, blocking (start-up, shutdown). */
  syncNow(): void;
}

/** `fdatasync` of one store's `-wal` file; the file exists while a connection to the store is open. */
export class WalSync implements CommitSync {
  readonly #fd: number;
  #inFlight = 0;
  #closing = false;

  private constructor(fd: number) {
    this.#fd = fd;
  }

  /** Opens the log of the database at `databasePath` (open it in WAL mode first: SQLite creates the file). */
  static open(databasePath: string): WalSync {
    return new WalSync(openSync(`${databasePath}-wal`, 'r'));
  }

  sync(): Promise<void> {
    this.#inFlight++;
    return new Promise((resolve, reject) => {
      fdatasync(this.#fd, (error) => {
        this.#inFlight--;
        if (this.#closing && this.#inFlight === 0) {
          closeSync(this.#fd);
        }
        if (error) {
          reject(error);
        } else {
          resolve();
        }
      });
    });
  }

  syncNow(): void {
    fdatasyncSync(this.#fd);
  }

  /** Closes the file once no sync is running on it. */
  close(): void {
    if (this.#closing) {
      return;
    }
    this.#closing = true;
    if (this.#inFlight === 0) {
      closeSync(this.#fd);
    }
  }
}
