/**
 * Moves SQLite's WAL checkpoints off the event loop. SQLite checkpoints by itself inside the COMMIT that takes the
 * log past 1,000 pages: it copies the log into the database file and syncs both, all on the connection's thread,
 * which is the event loop's (node:sqlite is synchronous). Here the store's own connection runs with
 * `wal_autocheckpoint=0`, and a worker thread with its own connection to the same file runs
 * `wal_checkpoint(PASSIVE)` instead: it never waits for a lock and never blocks the store's reads. The log stays
 * the source of truth until a checkpoint has copied and synced it, so durability does not change.
 *
 * When: the group commit (group-commit.ts) reports each commit and, once about 1,000 pages have been committed since
 * the last checkpoint (SQLite's own threshold; pages per commit are learnt from each checkpoint's count of the
 * log's frames), runs one with no group committing meanwhile, so that it copies the whole log and the next write
 * starts the log over, as after SQLite's own checkpoint (otherwise the log would only grow). Reads go on. The
 * worker is started on the first checkpoint, so a store that is only read never starts one; no timer runs.
 *
 * If the worker cannot run (it fails to start, to open the file, or to checkpoint), `onFailure` is called once and
 * the checkpointer stops: the store turns SQLite's automatic checkpoint back on (sqlite-repository.ts).
 */
import { Worker } from 'node:worker_threads';

/** How the checkpointer paces itself and reports that it stopped. */
export interface WalCheckpointerOptions {
  /** Pages committed to the log between two checkpoints (SQLite's `wal_autocheckpoint`, 1,000 by default). */
  readonly pagesBetween?: number;
  /** Called once when the worker fails; the checkpointer is stopped by then. */
  readonly onFailure?: (error: Error) => void;
}

/** What the group commit needs to checkpoint between its commits. */
export interface Checkpointer {
  /** Counts a COMMIT made on the store's connection. */
  noteCommit(): void;
  /** True when a checkpoint should run now: none is running and enough pages were committed since the last one. */
  due(): boolean;
  /** Runs a checkpoint unless one is running; resolves once it finished or the checkpointer stopped. Never rejects. */
  run(): Promise<void>;
}

/** What the worker answers to each request. */
type WorkerReply = { readonly log: number } | { readonly failed: string };

const DEFAULT_PAGES_BETWEEN = 1000;
/** Until the first checkpoint counts the log: a commit of one small resource and its index rows is about 8 pages. */
const FIRST_PAGES_PER_COMMIT_GUESS = 16;
/** How long `close()` waits for the worker's connection to close (a checkpoint in progress finishes first). */
const CLOSE_WAIT_MS = 10_000;

/**
 * The worker, as CommonJS source evaluated on its own thread (no file to resolve: the same in the sources, in
 * dist/ and under jest). It closes its connection on 'close' and says so through the shared flag, which the
 * store's `close()` waits on synchronously.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { DatabaseSync } = require('node:sqlite');
const closed = new Int32Array(workerData.closed);
let database;
try {
  database = new DatabaseSync(workerData.path, { timeout: 0 });
  database.exec('PRAGMA wal_autocheckpoint = 0');
  database.exec('PRAGMA synchronous = NORMAL');
} catch (error) {
  parentPort.postMessage({ failed: String(error && error.message) });
}
const checkpoint = database && database.prepare('PRAGMA wal_checkpoint(PASSIVE)');
parentPort.on('message', (message) => {
  if (message === 'close') {
    try { if (database) database.close(); } catch {}
    Atomics.store(closed, 0, 1);
    Atomics.notify(closed, 0);
    parentPort.close();
    return;
  }
  if (!checkpoint) return;
  try {
    const result = checkpoint.get();
    parentPort.postMessage({ log: Number(result.log) });
  } catch (error) {
    // A checkpoint that another connection holds up is not an error (the row says busy); this is the disk.
    parentPort.postMessage({ failed: String(error && error.message) });
  }
});
`;

/** Runs one store file's checkpoints on a worker thread; the group commit asks for them (group-commit.ts). */
export class WalCheckpointer implements Checkpointer {
  readonly #path: string;
  readonly #pagesBetween: number;
  readonly #onFailure: ((error: Error) => void) | undefined;
  readonly #closed = new SharedArrayBuffer(4);
  #worker: Worker | undefined;
  /** Settles the checkpoint in flight (the worker answers one request at a time). */
  #finish: (() => void) | undefined;
  #commits = 0;
  /** The commits the checkpoint in flight covers: the log it finds holds their frames. */
  #commitsCovered = 0;
  #pagesPerCommit = FIRST_PAGES_PER_COMMIT_GUESS;
  #stopped = false;
  #completed = 0;

  constructor(databasePath: string, options: WalCheckpointerOptions = {}) {
    this.#path = databasePath;
    this.#pagesBetween = Math.max(1, options.pagesBetween ?? DEFAULT_PAGES_BETWEEN);
    this.#onFailure = options.onFailure;
  }

  /** Checkpoints that finished since the store opened (for tests and metrics). */
  get completed(): number {
    return this.#completed;
  }

  /** False once the worker failed or the checkpointer was closed. */
  get running(): boolean {
    return !this.#stopped;
  }

  noteCommit(): void {
    this.#commits++;
  }

  due(): boolean {
    return !this.#stopped && this.#finish === undefined && this.#commits * this.#pagesPerCommit >= this.#pagesBetween;
  }

  run(): Promise<void> {
    if (this.#stopped || this.#finish !== undefined) {
      return Promise.resolve();
    }
    this.#commitsCovered = this.#commits;
    this.#commits = 0;
    const finished = new Promise<void>((resolve) => {
      this.#finish = resolve;
    });
    this.#workerOrStart().postMessage('checkpoint');
    return finished;
  }

  /**
   * Stops the worker and waits (blocking, at most a few seconds) until its connection is closed, so that the
   * store's own connection closes last: SQLite then checkpoints the whole log and removes it, as before.
   */
  close(): void {
    if (this.#stopped) {
      return;
    }
    this.#stopped = true;
    this.#settle();
    const worker = this.#worker;
    if (!worker) {
      return;
    }
    worker.postMessage('close');
    Atomics.wait(new Int32Array(this.#closed), 0, 0, CLOSE_WAIT_MS);
  }

  #workerOrStart(): Worker {
    if (this.#worker) {
      return this.#worker;
    }
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path: this.#path, closed: this.#closed } });
    // The store's connection keeps the process's work; the worker never holds the process open.
    worker.unref();
    worker.on('message', (reply: WorkerReply) => {
      if ('failed' in reply) {
        this.#fail(new Error(`WAL checkpoint failed: ${reply.failed}`));
        return;
      }
      this.#completed++;
      if (this.#commitsCovered > 0 && reply.log > 0) {
        this.#pagesPerCommit = reply.log / this.#commitsCovered;
      }
      this.#settle();
    });
    worker.on('error', (error) => this.#fail(error));
    worker.on('exit', (code) => {
      if (!this.#stopped) {
        this.#fail(new Error(`WAL checkpoint worker exited (${code})`));
      }
    });
    this.#worker = worker;
    return worker;
  }

  #settle(): void {
    const finish = this.#finish;
    this.#finish = undefined;
    finish?.();
  }

  #fail(error: Error): void {
    if (this.#stopped) {
      return;
    }
    this.#stopped = true;
    this.#settle();
    void this.#worker?.terminate();
    this.#onFailure?.(error);
  }
}
