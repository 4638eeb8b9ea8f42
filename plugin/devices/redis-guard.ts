/**
 * Whether the host's Redis answers, as fhirgate's limits see it. The client is the server's, with the server's
 * options: ioredis waits for a paused Redis as long as it stays paused, and for a dead one up to its connect
 * timeout. So every call fhirgate makes carries a deadline of its own; a call that misses it or fails marks Redis
 * unavailable. From then on calls are not sent to Redis at all (the caller uses its in-memory fallback) while a
 * probe asks Redis in the background once per probe interval; the first probe Redis answers makes it available
 * again. Each change is logged once, not each call.
 */
import type { HostLogger } from '../host.ts';

/** How the guard is set up. */
export interface RedisGuardOptions {
  /** The deadline of each call, in milliseconds (the probe's too). */
  readonly deadlineMs: number;
  /** How often, at most, an unavailable Redis is asked again. */
  readonly probeIntervalMs: number;
  /** One small call to Redis, within the deadline: resolves when Redis answered. */
  readonly probe: () => Promise<unknown>;
  readonly logger?: HostLogger;
  /** What counts in Redis, for the log lines (default `device rate limits`). */
  readonly counts?: string;
}

/**
 * Tells callers whether to ask Redis, and learns from their outcomes. `shouldAsk` hands out the current epoch; an
 * outcome counts only for the epoch it was asked in, so a late failure of a call sent before Redis came back does
 * not mark it down again.
 */
export class RedisGuard {
  readonly deadlineMs: number;
  private readonly options: RedisGuardOptions;
  private isAvailable = true;
  private epoch = 0;
  private probing = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private unavailableSince = 0;
  private closed = false;

  constructor(options: RedisGuardOptions) {
    this.options = options;
    this.deadlineMs = options.deadlineMs;
  }

  /** True while Redis answers within the deadline. */
  get available(): boolean {
    return this.isAvailable;
  }

  /** The epoch to pass to `failed` when Redis is to be asked now; undefined while it is unavailable. */
  shouldAsk(): number | undefined {
    return this.isAvailable ? this.epoch : undefined;
  }

  /** A call of `epoch` missed its deadline or failed: Redis is unavailable until a probe gets an answer. */
  failed(epoch: number, error: unknown): void {
    if (!this.isAvailable || epoch !== this.epoch) {
      return;
    }
    this.isAvailable = false;
    this.epoch++;
    this.unavailableSince = Date.now();
    if (!this.closed) {
      this.probeTimer = setInterval(() => this.probe(), this.options.probeIntervalMs);
      this.probeTimer.unref();
    }
    this.options.logger?.warn(`fhirgate: Redis did not answer; ${this.counts} count in this instance's memory until it does`, {
      deadlineMs: this.deadlineMs,
      error: describeError(error),
    });
  }

  /** Stops probing. For shutdown. */
  close(): void {
    this.closed = true;
    clearInterval(this.probeTimer);
  }

  private get counts(): string {
    return this.options.counts ?? 'device rate limits';
  }

  private probe(): void {
    if (this.probing) {
      return;
    }
    this.probing = true;
    this.options
      .probe()
      .then(
        () => this.recovered(),
        () => undefined
      )
      .finally(() => {
        this.probing = false;
      });
  }

  private recovered(): void {
    if (this.isAvailable) {
      return;
    }
    this.isAvailable = true;
    this.epoch++;
    clearInterval(this.probeTimer);
    this.options.logger?.info(`fhirgate: Redis answers again; ${this.counts} are shared through it again`, {
      unavailableMs: Date.now() - this.unavailableSince,
    });
  }
}

/** What a failed call says, without a stack: an ioredis error's name and message name the cause, never a secret. */
function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
