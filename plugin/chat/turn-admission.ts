/**
 * How many chat turns this instance prepares at once: authentication, the checks, the prompt's record and the
 * history, the CPU-bound part of a turn before the provider is called. A burst of requests beyond the bound waits
 * here, first come first served, holding only its parsed request, instead of every turn of the burst interleaving
 * its reads and writes and holding what each has loaded until all are done. A turn leaves as soon as its provider
 * call starts (or it ends), so replies streaming in do not hold places. No request is refused for waiting.
 */
import { Semaphore } from 'async-mutex';

/** Where the number of waiting turns goes (the `fhirgate.chat.waiting_turns` up-down counter). */
export interface WaitingTurnsCounter {
  add(delta: number): void;
}

export class TurnAdmission {
  readonly #places: Semaphore;
  readonly #waiting: WaitingTurnsCounter | undefined;

  constructor(maxPreparing: number, waiting?: WaitingTurnsCounter) {
    this.#places = new Semaphore(maxPreparing);
    this.#waiting = waiting;
    // Shown as 0 from the start, not only once a burst has had to wait.
    waiting?.add(0);
  }

  /** Waits for a place; resolves to the function that gives it back (calling it again does nothing). */
  async enter(): Promise<() => void> {
    const waits = this.#places.isLocked();
    if (waits) this.#waiting?.add(1);
    const [, release] = await this.#places.acquire().finally(() => {
      if (waits) this.#waiting?.add(-1);
    });
    let left = false;
    return () => {
      if (!left) {
        left = true;
        release();
      }
    };
  }
}
