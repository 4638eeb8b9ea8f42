/**
 * How many chat turns this instance prepares at once: authentication, the checks, the prompt's record and the
 * history, the CPU-bound part of a turn before the provider is called. A burst of requests beyond the bound waits
 * here, first come first served, holding only its parsed request, instead of every turn of the burst interleaving
 * its reads and writes and holding what each has loaded until all are done. A turn leaves as soon as its provider
 * call starts (or it ends), so replies streaming in do not hold places. No request is refused for waiting.
 */
import { Semaphore } from 'async-mutex';

export class TurnAdmission {
  readonly #places: Semaphore;

  constructor(maxPreparing: number) {
    this.#places = new Semaphore(maxPreparing);
  }

  /** Waits for a place; resolves to the function that gives it back (calling it again does nothing). */
  async enter(): Promise<() => void> {
    const [, release] = await this.#places.acquire();
    let left = false;
    return () => {
      if (!left) {
        left = true;
        release();
      }
    };
  }
}
