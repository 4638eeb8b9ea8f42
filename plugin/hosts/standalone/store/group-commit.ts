/**
 * Group commit: the writes that concurrent requests make in one turn of the event loop share one SQLite
 * transaction, so they share one COMMIT and its one WAL fsync instead of paying one each.
 *
 * node:sqlite is synchronous, so a COMMIT with `synchronous=FULL` blocks the event loop for the whole fsync. A
 * write is therefore not run when it is asked for: it is queued, and the queue is flushed once the event loop has
 * handled every callback that was ready (`setImmediate`), or at once when it reaches `maxWrites`. The flush runs
 * the queued writes in order inside one `BEGIN IMMEDIATE ... COMMIT`, each in its own savepoint, all in one
 * synchronous call:
 * - the write lock is held only for the group's own statements and the fsync, never across an `await`, so another
 *   process on the same file waits no longer than for one commit;
 * - no read ever sees a group's uncommitted rows: the transaction opens and ends within the flush, and reads run
 *   between flushes. A request cannot answer with data that later fails to commit;
 * - a write's promise resolves only after the COMMIT that made it durable returned, so "resolved" still means
 *   "survives power loss" with `synchronous=FULL`. A write that throws is rolled back alone (its savepoint) and
 *   rejects; if BEGIN or COMMIT fails, every write of the group rejects and none of them is stored.
 *
 * With a {@link CommitSync} (wal-sync.ts: SQLite at `synchronous=NORMAL`, the log's fdatasync on the thread pool),
 * the fsync leaves the event loop: after COMMIT the group's writes wait for the sync, and while it runs nothing
 * else touches the database: the next group waits (and grows: the writes that arrive meanwhile share the next
 * sync), and reads wait too (`whenSynced`), so no request is ever answered from a commit that is not yet on disk.
 * A failed sync fails its writes and every later operation: what the disk holds is no longer known (the store must
 * be reopened).
 *
 * With a `verify` (store-file-identity.ts), each group, once durable, is acknowledged only if its file is still the
 * store's: a group committed into a file that was deleted or replaced meanwhile fails, and so does every later
 * operation, as after a failed sync. A write is never acknowledged into a file the next start will not find.
 */
import type { AsyncMutex } from './async-mutex.ts';
import type { Checkpointer } from './wal-checkpointer.ts';
import type { CommitSync } from './wal-sync.ts';

/** What a group commit needs from the store: transactions and savepoints on one connection. */
export interface GroupTransactions {
  /** Opens a transaction holding the write lock. */
  begin(): void;
  /** Commits the open transaction; throws when SQLite refuses (the transaction may still be open). */
  commit(): void;
  /** Rolls back the open transaction, if SQLite has not already. */
  rollback(): void;
  /** Runs `work` in a savepoint of the open transaction (or its own transaction when none is open). */
  atomically<T>(work: () => T): T;
  /** False once SQLite has rolled the transaction back by itself (I/O error, disk full). */
  readonly inTransaction: boolean;
}

/** How writes are grouped. */
export interface GroupCommitOptions {
  /** A group is committed at once when it holds this many writes, bounding the write lock's window. */
  readonly maxWrites?: number;
  /** Makes commits durable off the event loop; without it, each COMMIT is durable when it returns. */
  readonly sync?: CommitSync;
  /**
   * Checkpoints the log off the event loop (wal-checkpointer.ts): when one is due after a group is durable, it runs
   * before the next group commits, so that it copies the whole log and the next write starts the log over. Reads
   * do not wait for it.
   */
  readonly checkpoint?: Checkpointer;
  /** Throws when what was committed can no longer be kept (the store's file is gone); called before writes are acknowledged. */
  readonly verify?: () => void;
}

interface QueuedWrite {
  /** Runs the write's statements inside the open transaction; throws to roll back this write alone. */
  readonly run: () => void;
  /** Settles the caller's promise with the write's result, once its group is committed. */
  readonly succeed: () => void;
  readonly fail: (error: unknown) => void;
}

/** Enough to amortise the fsync over a busy host's concurrent requests; small enough to keep the lock short. */
const DEFAULT_MAX_WRITES = 64;

/** Queues writes and commits each event-loop turn's writes together. */
export class GroupCommit {
  readonly #transactions: GroupTransactions;
  readonly #connection: AsyncMutex;
  readonly #maxWrites: number;
  #queue: QueuedWrite[] = [];
  #flushScheduled = false;
  #immediate: NodeJS.Immediate | undefined;
  readonly #sync: CommitSync | undefined;
  /** Resolves (never rejects) once the sync in flight returned; undefined when no commit waits for its sync. */
  #syncing: Promise<void> | undefined;
  /** Set for good by a failed sync. */
  #failure: unknown;
  readonly #checkpoint: Checkpointer | undefined;
  /** True while a checkpoint runs: groups wait (reads do not: a checkpoint changes nothing they see). */
  #checkpointing = false;
  readonly #verify: (() => void) | undefined;

  /**
   * `connection` is held by a `withTransaction` in progress: a group never commits inside another caller's open
   * transaction, it waits for the connection and then commits on its own.
   */
  constructor(transactions: GroupTransactions, connection: AsyncMutex, options: GroupCommitOptions = {}) {
    this.#transactions = transactions;
    this.#connection = connection;
    this.#maxWrites = Math.max(1, options.maxWrites ?? DEFAULT_MAX_WRITES);
    this.#sync = options.sync;
    this.#checkpoint = options.checkpoint;
    this.#verify = options.verify;
  }

  /**
   * True when what the database holds is durable and may be read: no commit waits for its sync, and no sync has
   * failed. Otherwise wait for `whenSynced()` (and check again).
   */
  get readable(): boolean {
    return this.#syncing === undefined && this.#failure === undefined;
  }

  /**
   * Resolves once no commit waits for its sync (at once when none does); rejects once a sync has failed. Read
   * only when `readable`, in the same synchronous step: then every row the read sees is durable.
   */
  whenSynced(): Promise<void> {
    if (this.#failure !== undefined) {
      return Promise.reject(this.#failure);
    }
    return this.#syncing ?? Promise.resolve();
  }

  /**
   * For a COMMIT made outside the groups (a `withTransaction`): resolves once it is durable. Call it right after
   * the COMMIT, while still holding the connection.
   */
  afterCommit(): Promise<void> {
    // Counted towards the next checkpoint, which runs after a later group (this caller still holds the connection).
    this.#checkpoint?.noteCommit();
    return this.#startSync().then(() => this.#verifyKept());
  }

  /**
   * Fails every later operation with `error`, for good, as a failed sync does (the store's file is gone). Writes
   * already acknowledged stay so.
   */
  fail(error: unknown): void {
    this.#failure ??= error;
  }

  /** Writes queued and not yet committed. */
  get pendingWrites(): number {
    return this.#queue.length;
  }

  /**
   * Queues `work` (synchronous statements on the store) for the next group; resolves with its result once the
   * group's COMMIT returned. Prepare what does not need the database (serialising, index rows) before calling, so
   * that the write lock is not held for it.
   */
  write<T>(work: () => T): Promise<T> {
    if (this.#failure !== undefined) {
      return Promise.reject(this.#failure);
    }
    return new Promise<T>((resolve, reject) => {
      let result: T;
      this.#queue.push({
        run: () => {
          result = work();
        },
        succeed: () => resolve(result),
        fail: reject,
      });
      this.#schedule();
    });
  }

  /**
   * Commits the queued writes now, when no transaction holds the connection, and makes them durable before it
   * returns (before closing the database).
   */
  flushNow(): void {
    if (!this.#connection.isLocked) {
      this.#flush(true);
    }
  }

  #schedule(): void {
    if (this.#queue.length >= this.#maxWrites && !this.#connection.isLocked && !this.#syncing && !this.#checkpointing) {
      this.#flush();
      return;
    }
    if (this.#flushScheduled) {
      return;
    }
    this.#flushLater();
  }

  /** Schedules the flush after the callbacks ready now, or after the transaction holding the connection. */
  #flushLater(): void {
    this.#flushScheduled = true;
    if (this.#connection.isLocked) {
      // Queued now, behind the transaction in progress: reads that callers make after this write wait behind it
      // too, as they waited behind a write before writes were grouped.
      this.#flushAfterConnection();
    } else {
      this.#immediate = setImmediate(() => this.#flushWhenFree());
    }
  }

  #flushWhenFree(): void {
    this.#immediate = undefined;
    if (this.#connection.isLocked) {
      this.#flushAfterConnection();
    } else {
      this.#flush();
    }
  }

  #flushAfterConnection(): void {
    // #flush never throws: every failure is delivered to the writes' own promises.
    void this.#connection.runExclusive(() => this.#flush());
  }

  /**
   * Runs and commits every queued write; settles each write's promise. Never throws. While a sync is in flight it
   * only marks the flush as due (the sync's end schedules it), unless `now` (closing: synced before returning).
   */
  #flush(now = false): void {
    if (this.#immediate) {
      clearImmediate(this.#immediate);
      this.#immediate = undefined;
    }
    if ((this.#syncing || this.#checkpointing) && !now) {
      this.#flushScheduled = true;
      return;
    }
    this.#flushScheduled = false;
    const group = this.#queue;
    this.#queue = [];
    if (group.length === 0) {
      return;
    }
    if (this.#failure !== undefined) {
      failAll(group, this.#failure);
      return;
    }
    if (group.length === 1) {
      this.#commitAlone(group[0], now);
      return;
    }
    try {
      this.#transactions.begin();
    } catch (error) {
      failAll(group, error);
      return;
    }
    const stored: QueuedWrite[] = [];
    for (let index = 0; index < group.length; index++) {
      const write = group[index];
      try {
        this.#transactions.atomically(write.run);
        stored.push(write);
      } catch (error) {
        write.fail(error);
        if (!this.#transactions.inTransaction) {
          // SQLite rolled the whole transaction back: the writes before this one are gone too.
          failAll(stored, error);
          failAll(group.slice(index + 1), error);
          return;
        }
      }
    }
    this.#commit(stored, now);
  }

  /** A group of one needs no savepoint: its own transaction is rolled back if it fails. */
  #commitAlone(write: QueuedWrite, now: boolean): void {
    try {
      this.#transactions.atomically(write.run);
    } catch (error) {
      write.fail(error);
      return;
    }
    this.#settleWhenDurable([write], now);
  }

  #commit(stored: readonly QueuedWrite[], now: boolean): void {
    try {
      if (stored.length === 0) {
        // Every write failed and was rolled back: nothing to make durable, no fsync.
        this.#transactions.rollback();
        return;
      }
      this.#transactions.commit();
    } catch (error) {
      try {
        this.#transactions.rollback();
      } catch {
        // The COMMIT's error says what went wrong; a failed rollback leaves nothing committed anyway.
      }
      failAll(stored, error);
      return;
    }
    this.#settleWhenDurable(stored, now);
  }

  /** Resolves committed writes once they are durable: now without a sync; after it (or blocking, `now`) with one. */
  #settleWhenDurable(writes: readonly QueuedWrite[], now: boolean): void {
    this.#checkpoint?.noteCommit();
    if (!this.#sync) {
      if (this.#acknowledge(writes)) {
        this.#checkpointIfDue();
      }
      return;
    }
    if (now) {
      try {
        this.#sync.syncNow();
      } catch (error) {
        this.#failure ??= error;
        failAll(writes, error);
        return;
      }
      this.#acknowledge(writes);
      return;
    }
    this.#startSync().then(
      () => {
        if (this.#acknowledge(writes)) {
          this.#checkpointIfDue();
        }
      },
      (error: unknown) => failAll(writes, error)
    );
  }

  /** Resolves durable writes, unless their file is no longer the store's: then they fail, and so does everything after. */
  #acknowledge(writes: readonly QueuedWrite[]): boolean {
    try {
      this.#verifyKept();
    } catch (error) {
      failAll(writes, error);
      return false;
    }
    succeedAll(writes);
    return true;
  }

  /** Throws (and fails the store for good) when `verify` says what was committed cannot be kept. */
  #verifyKept(): void {
    try {
      this.#verify?.();
    } catch (error) {
      this.#failure ??= error;
      throw error;
    }
  }

  /** Runs a due checkpoint with no group committing meanwhile; the groups that queued up flush after it. */
  #checkpointIfDue(): void {
    const checkpoint = this.#checkpoint;
    if (!checkpoint || this.#checkpointing || this.#failure !== undefined || !checkpoint.due()) {
      return;
    }
    this.#checkpointing = true;
    void checkpoint.run().then(() => {
      this.#checkpointing = false;
      if (this.#flushScheduled) {
        this.#flushLater();
      }
    });
  }

  /**
   * Syncs the commits made so far. Until it returns, `readable` is false; when it returns, the writes waiting for it
   * and the reads waiting in `whenSynced` go on (promise jobs) before the next group is flushed (`setImmediate`).
   */
  #startSync(): Promise<void> {
    const sync = this.#sync;
    if (!sync) {
      return Promise.resolve();
    }
    let finished!: () => void;
    const syncing = new Promise<void>((resolve) => {
      finished = resolve;
    });
    this.#syncing = syncing;
    const end = (): void => {
      if (this.#syncing === syncing) {
        this.#syncing = undefined;
      }
      finished();
      if (this.#flushScheduled) {
        // Never at once: the reads this sync held go first (promise jobs), then the next group (setImmediate).
        this.#flushLater();
      }
    };
    return sync.sync().then(end, (error: unknown) => {
      this.#failure ??= error;
      end();
      throw error;
    });
  }
}

function succeedAll(writes: readonly QueuedWrite[]): void {
  for (const write of writes) {
    write.succeed();
  }
}

function failAll(writes: readonly QueuedWrite[], error: unknown): void {
  for (const write of writes) {
    write.fail(error);
  }
}
