/**
 * Chat turns per caller on this instance: a caller (project and profile) may have at most `limit` of one kind
 * (open streams, or non-streaming turns) running at once, so one account cannot tie up the instance's connections
 * and provider capacity. Beyond it a new turn is refused with 429 before anything is stored.
 */
import { AppError } from '../errors.ts';

export class CallerSlots {
  readonly #limit: number;
  readonly #what: string;
  readonly #open = new Map<string, number>();

  /** `what` names the kind in the refusal, e.g. `open streams`. */
  constructor(limit: number, what: string) {
    this.#limit = limit;
    this.#what = what;
  }

  /** Takes a slot for `caller`, or throws 429; give it back with the returned function, once. */
  take(caller: string): () => void {
    const open = this.#open.get(caller) ?? 0;
    if (open >= this.#limit) {
      throw new AppError('rate_limited', `Too many ${this.#what}: at most ${this.#limit} at once per caller. Retry when one has finished.`, {
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
