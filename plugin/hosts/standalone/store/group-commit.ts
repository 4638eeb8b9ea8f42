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
 */
import type { AsyncMutex } from './async-mutex.ts';

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

  /**
   * `connection` is held by a `withTransaction` in progress: a group never commits inside another caller's open
   * transaction, it waits for the connection and then commits on its own.
   */
  constructor(transactions: GroupTransactions, connection: AsyncMutex, options: GroupCommitOptions = {}) {
    this.#transactions = transactions;
    this.#connection = connection;
    this.#maxWrites = Math.max(1, options.maxWrites ?? DEFAULT_MAX_WRITES);
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

  /** Commits the queued writes now, when no transaction holds the connection (before closing the database). */
  flushNow(): void {
    if (!this.#connection.isLocked) {
      this.#flush();
    }
  }

  #schedule(): void {
    if (this.#queue.length >= this.#maxWrites && !this.#connection.isLocked) {
      this.#flush();
      return;
    }
    if (this.#flushScheduled) {
      return;
    }
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

  /** Runs and commits every queued write; settles each write's promise. Never throws. */
  #flush(): void {
    if (this.#immediate) {
      clearImmediate(this.#immediate);
      this.#immediate = undefined;
    }
    this.#flushScheduled = false;
    const group = this.#queue;
    this.#queue = [];
    if (group.length === 0) {
      return;
    }
    if (group.length === 1) {
      this.#commitAlone(group[0]);
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
    this.#commit(stored);
  }

  /** A group of one needs no savepoint: its own transaction is rolled back if it fails. */
  #commitAlone(write: QueuedWrite): void {
    try {
      this.#transactions.atomically(write.run);
    } catch (error) {
      write.fail(error);
      return;
    }
    write.succeed();
  }

  #commit(stored: readonly QueuedWrite[]): void {
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
    for (const write of stored) {
      write.succeed();
    }
  }
}

function failAll(writes: readonly QueuedWrite[], error: unknown): void {
  for (const write of writes) {
    write.fail(error);
  }
}
