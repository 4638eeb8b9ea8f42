/**
 * Open streams per caller on this instance: a caller (project and profile) may hold at most `limit` at once, so one
 * account cannot tie up the instance's connections and provider capacity. Beyond it a new stream is refused with
 * 429 before anything is stored.
 */
import { AppError } from '../errors.ts';

export class StreamSlots {
  readonly #limit: number;
  readonly #open = new Map<string, number>();

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Takes a slot for `caller`, or throws 429; give it back with the returned function, once. */
  take(caller: string): () => void {
    const open = this.#open.get(caller) ?? 0;
    if (open >= this.#limit) {
      throw new AppError('rate_limited', `Too many open streams: at most ${this.#limit} at once per caller. Retry when one has finished.`, {
        isRetryable: true,
        retryAfterSeconds: 1,
      });
    }
    this.#open.set(caller, open + 1);
    let given = false;
    return () => {
      if (given) {
        return;
      }
      given = true;
      const left = (this.#open.get(caller) ?? 1) - 1;
      if (left === 0) {
        this.#open.delete(caller);
      } else {
        this.#open.set(caller, left);
      }
    };
  }
}
