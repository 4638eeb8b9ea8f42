import type { CommitSync } from '../../plugin/hosts/standalone/store/wal-sync.ts';

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
