/**
 * The replies' usage on its way to the budget counters' Redis (budget-counters.ts): every reply a project records in
 * one turn of the event loop goes in one script call (budget-redis.ts: ADD_SCRIPT, HINCRBY on the day's and the
 * month's hash, once per batch id), not awaited by the turn; Redis's answer (the new totals) goes into the cells'
 * view. A batch Redis did not answer in time is sent again under its own id (it may have been applied); one never
 * sent (Redis unavailable) waits, merged with the others of its project and periods, until Redis answers.
 */
import { randomUUID } from 'node:crypto';
import type { HostRedis } from '../host.ts';
import type { RedisGuard } from '../devices/redis-guard.ts';
import { addTo, isFull, merge, type Addition, type Totals, type UserCell } from './budget-counter-cells.ts';
import { ADD_SCRIPT, ADDITION_ID_TTL_MS, runScript } from './budget-redis.ts';

/** Where additions go. */
export interface BudgetAdditionsOptions {
  readonly redis: HostRedis;
  readonly guard: RedisGuard;
  readonly keyPrefix: string;
  readonly deadlineMs: number;
  readonly now: () => number;
}

/** The additions of one instance's counters. */
export class BudgetAdditions {
  readonly #options: BudgetAdditionsOptions;
  /** Batches gathering this turn of the event loop's replies, by project and periods. */
  readonly #open = new Map<string, Addition>();
  /** Batches whose call failed (Redis may have applied them): sent again as they are, under their id, once it answers. */
  #uncertain: Addition[] = [];
  /** Batches never sent (Redis was unavailable), merged by key: sent once it answers. */
  readonly #unsent = new Map<string, Addition[]>();

  constructor(options: BudgetAdditionsOptions) {
    this.#options = options;
  }

  /**
   * Adds `delta` of `user` to its day's and month's cells: in their `local` at once, and in Redis with the project's
   * other additions once the event loop's turn is over (`sent`: when the reply was recorded, epoch ms).
   */
  add(projectId: string, user: string, cells: readonly [UserCell, UserCell], delta: Totals, sent: number): void {
    for (const cell of cells) {
      addTo(cell.local, delta, 1);
      addTo(cell.project.local, delta, 1);
    }
    const redis = this.#options.redis;
    const key = `${projectId}\n${cells[0].redisKey}\n${cells[1].redisKey}`;
    let batch = this.#open.get(key);
    if (batch === undefined || isFull(batch, user)) {
      if (batch !== undefined) {
        this.#send(redis, batch);
      }
      batch = this.#newBatch(key, projectId, cells);
      this.#open.set(key, batch);
      if (this.#open.size === 1) {
        setImmediate(() => this.#sendOpen(redis));
      }
    }
    batch.earliest = Math.min(batch.earliest, sent);
    merge(batch, user, { cells, delta });
  }

  #newBatch(key: string, projectId: string, cells: readonly UserCell[]): Addition {
    const id = randomUUID();
    return {
      key,
      idKey: `${this.#options.keyPrefix}budget:{${projectId}}:addition:${id}`,
      redisKeys: cells.map((cell) => cell.redisKey),
      expireAt: cells.map((cell) => cell.expireAt),
      entries: new Map(),
      earliest: Number.POSITIVE_INFINITY,
    };
  }

  /** Sends the batches of this turn of the event loop, and those that waited for Redis. */
  #sendOpen(redis: HostRedis): void {
    const batches = [...this.#open.values()];
    this.#open.clear();
    for (const batch of batches) {
      this.#send(redis, batch);
    }
    this.#sendWaiting(redis);
  }

  /** Keeps a batch that was never sent, merged with the others of its key, until Redis answers. */
  #keepUnsent(batch: Addition): void {
    const kept = this.#unsent.get(batch.key) ?? [];
    this.#unsent.set(batch.key, kept);
    for (const [user, entry] of batch.entries) {
      let target = kept.at(-1);
      if (target === undefined || isFull(target, user)) {
        target = { ...batch, idKey: `${batch.idKey}:${kept.length}`, entries: new Map() };
        kept.push(target);
      }
      target.earliest = Math.min(target.earliest, batch.earliest);
      merge(target, user, entry);
    }
  }

  /** Sends a batch; Redis's answer (the new totals) goes into the cells' view. A failure keeps it waiting. */
  #send(redis: HostRedis, batch: Addition): void {
    const epoch = this.#options.guard.shouldAsk();
    if (epoch === undefined) {
      this.#keepUnsent(batch);
      return;
    }
    const entries = [...batch.entries.entries()];
    const args: (string | number)[] = [ADDITION_ID_TTL_MS, ...batch.expireAt, Number.isFinite(batch.earliest) ? batch.earliest : this.#options.now()];
    for (const [user, entry] of entries) {
      args.push(user, entry.delta.tokens, entry.delta.cost);
    }
    runScript(redis, this.#options.deadlineMs, ADD_SCRIPT, [...batch.redisKeys, batch.idKey], args).then(
      (answer) => {
        const stride = 2 + 2 * entries.length;
        batch.redisKeys.forEach((_key, index) => {
          const at = index * stride;
          // A hash the additions created (Redis lost it, or its period began) waits to be seeded: the next check reads it first.
          const waitsForSeed = Number(answer[batch.redisKeys.length * stride + index]) === 1;
          entries.forEach(([, entry], position) => {
            const cell = entry.cells[index];
            addTo(cell.local, entry.delta, -1);
            addTo(cell.project.local, entry.delta, -1);
            cell.project.shared.tokens = Number(answer[at] ?? 0);
            cell.project.shared.cost = Number(answer[at + 1] ?? 0);
            cell.shared.tokens = Number(answer[at + 2 + 2 * position] ?? 0);
            cell.shared.cost = Number(answer[at + 3 + 2 * position] ?? 0);
            if (waitsForSeed) {
              cell.fetchedAt = Number.NEGATIVE_INFINITY;
            }
          });
        });
      },
      (error: unknown) => {
        this.#options.guard.failed(epoch, error);
        this.#uncertain.push(batch);
      },
    );
  }

  /** Sends what waited for Redis, once it answers: the uncertain batches under their own ids, the rest merged. */
  #sendWaiting(redis: HostRedis): void {
    if ((this.#uncertain.length === 0 && this.#unsent.size === 0) || this.#options.guard.shouldAsk() === undefined) {
      return;
    }
    const waiting = [...this.#uncertain, ...[...this.#unsent.values()].flat()];
    this.#uncertain = [];
    this.#unsent.clear();
    for (const batch of waiting) {
      this.#send(redis, batch);
    }
  }
}
