/** A first-come, first-served lock for async work that must not interleave (one SQLite transaction at a time). */
export class AsyncMutex {
  #tail: Promise<void> = Promise.resolve();
  #holders = 0;

  /** True while a holder runs or waiters are queued. */
  get isLocked(): boolean {
    return this.#holders > 0;
  }

  /** Waits for the lock; resolves to the function that releases it (call it exactly once). */
  async acquire(): Promise<() => void> {
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = this.#tail;
    this.#tail = previous.then(() => released);
    this.#holders++;
    await previous;
    let done = false;
    return () => {
      if (!done) {
        done = true;
        this.#holders--;
        release();
      }
    };
  }

  /** Runs `work` while holding the lock. */
  async runExclusive<T>(work: () => Promise<T> | T): Promise<T> {
    const release = await this.acquire();
    try {
      return await work();
    } finally {
      release();
    }
  }
}
