import type { CommitSync } from '../../plugin/hosts/standalone/store/wal-sync.ts';
import type { Checkpointer } from '../../plugin/hosts/standalone/store/wal-checkpointer.ts';

/** A sync that returns when the test says: what the log's fdatasync on the thread pool looks like to the group. */
export class ControlledSync implements CommitSync {
  readonly pending: { resolve: () => void; reject: (error: Error) => void }[] = [];
  blockingSyncs = 0;

  sync(): Promise<void> {
    return new Promise((resolve, reject) => this.pending.push({ resolve, reject }));
  }

  syncNow(): void {
    this.blockingSyncs++;
  }

  /** Returns the oldest sync in flight. */
  finish(error?: Error): void {
    const next = this.pending.shift();
    if (!next) throw new Error('no sync in flight');
    if (error) next.reject(error);
    else next.resolve();
  }
}

/** A checkpointer that is due when the test says and finishes when the test says. */
export class ControlledCheckpoint implements Checkpointer {
  commits = 0;
  isDue = false;
  readonly running: (() => void)[] = [];

  noteCommit(): void {
    this.commits++;
  }

  due(): boolean {
    return this.isDue && this.running.length === 0;
  }

  run(): Promise<void> {
    this.isDue = false;
    return new Promise((resolve) => this.running.push(resolve));
  }

  /** Ends the checkpoint in flight. */
  finish(): void {
    const next = this.running.shift();
    if (!next) throw new Error('no checkpoint in flight');
    next();
  }
}
