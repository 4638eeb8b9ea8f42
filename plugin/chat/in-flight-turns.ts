/**
 * The chat turns between their prompt's record and their reply's record. At shutdown the plugin's close hook
 * drains them: turns get a bounded time to finish on their own; those still running are then stopped, so each
 * records its reply as `stopped` with the text delivered so far and tells its client, before the server exits.
 */
import { AppError } from '../errors.ts';

const SHUTDOWN_REASON = Symbol('fhirgate shutdown');

/** True when a turn's signal was aborted because the server is shutting down. */
export function isShutdownAbort(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason === SHUTDOWN_REASON;
}

/** The error a client gets when the server stops its turn, or refuses a new one, while shutting down. */
export function shuttingDownError(): AppError {
  return new AppError('unavailable', 'The server is shutting down; retry on another instance.', { isRetryable: true, retryAfterSeconds: 1 });
}

/** How a drain went. */
export interface DrainResult {
  /** Turns stopped when the grace period ran out (the others finished on their own). */
  readonly stopped: number;
}

/** The registry; one per plugin. */
export class InFlightTurns {
  readonly #turns = new Set<AbortController>();
  readonly #waiters = new Set<() => void>();
  #stopping = false;

  /** Turns running now. */
  get size(): number {
    return this.#turns.size;
  }

  /** Registers a turn and returns the controller that cancels its provider call; refused once the drain stops turns. */
  begin(): AbortController {
    if (this.#stopping) {
      throw shuttingDownError();
    }
    const controller = new AbortController();
    this.#turns.add(controller);
    return controller;
  }

  /** A turn's reply is on record. */
  end(controller: AbortController): void {
    this.#turns.delete(controller);
    if (this.#turns.size === 0) {
      for (const wake of this.#waiters) {
        wake();
      }
    }
  }

  /** Waits up to `graceMs` for the turns to finish, then stops the rest and waits for their replies' records. */
  async drain(graceMs: number): Promise<DrainResult> {
    await this.#idleWithin(graceMs);
    this.#stopping = true;
    const stopped = this.#turns.size;
    for (const controller of this.#turns) {
      controller.abort(SHUTDOWN_REASON);
    }
    await this.#idleWithin(Number.POSITIVE_INFINITY);
    return { stopped };
  }

  #idleWithin(milliseconds: number): Promise<void> {
    if (this.#turns.size === 0) {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(wake);
        resolve();
      };
      const timer = Number.isFinite(milliseconds) ? setTimeout(wake, milliseconds) : undefined;
      this.#waiters.add(wake);
    });
  }
}
