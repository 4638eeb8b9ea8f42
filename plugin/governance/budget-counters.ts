/**
 * The spend budgets are checked against, shared by every instance through the host's Redis, and each instance's
 * cached view of it, so that checking a turn is a lookup in memory, never a wait for Redis.
 *
 * In Redis, one hash per project and period (`<prefix>budget:{<project>}:day:2026-01-23`, `...:month:2026-01`)
 * holds the project's `tokens` and `cost` (nano-dollars) and each user's `tokens:<profile>` and `cost:<profile>`.
 * Recorded replies add their usage with one script per project and turn of the event loop (budget-redis.ts: HINCRBY
 * on the day's and the month's hash, once per batch id; its answer is the new totals), not awaited by the turn. A
 * check reads this instance's view of the two hashes (budget-counter-cells.ts: a cell for the project's fields and
 * one for the user's, per period): Redis's last answer, plus what this instance added since. A view older than `refreshMs` is read again in the background (the turn
 * does not wait); one older than `maxAgeMs` (a user idle for a while), or none at all, is read before the check,
 * within the deadline.
 *
 * Every Redis call has a deadline and is not made while the client is not connected; one that misses it marks Redis
 * unavailable (the RedisGuard of the device limits, devices/redis-guard.ts). Meanwhile the spend counts in this
 * instance's memory on top of the last view, and each batch is kept and sent again once Redis answers (its id
 * keeps one that was applied after all from counting twice). Without a Redis, the counters are this instance's own.
 */
import { randomUUID } from 'node:crypto';
import type { HostLogger, HostRedis } from '../host.ts';
import { RedisGuard } from '../devices/redis-guard.ts';
import { REDIS_DEADLINE_MS, REDIS_PROBE_INTERVAL_MS } from '../devices/limiter-store.ts';
import type { BudgetPeriods, PeriodWindow } from './budget-periods.ts';
import { ADD_SCRIPT, ADDITION_ID_TTL_MS, callWithDeadline, READ_SCRIPT, runScript } from './budget-redis.ts';
import type { BudgetPeriod, BudgetScope } from './project-governance-settings.ts';
import { addTo, CounterCell, isFull, merge, totalsOf, UserCell, type Addition, type Totals } from './budget-counter-cells.ts';

/** Tokens and cost (nano-dollars) of the project and of one user, in one period. */
export interface SpendTotals {
  readonly projectTokens: number;
  readonly projectCost: number;
  readonly userTokens: number;
  readonly userCost: number;
}

/** A user's view of the spend in the current day and month. */
export interface Spend {
  readonly day: SpendTotals;
  readonly month: SpendTotals;
}

/** How the counters are set up. */
export interface BudgetCountersOptions {
  /** The host's Redis; without it, the counters are this instance's own. */
  readonly redis?: HostRedis;
  /** The plugin's `redisKeyPrefix`. */
  readonly keyPrefix: string;
  /** A view older than this is read again in the background. */
  readonly refreshMs: number;
  /** A view older than this is read again before it is used. */
  readonly maxAgeMs: number;
  readonly deadlineMs?: number;
  readonly probeIntervalMs?: number;
  /** Most users' views kept (per period and project); the oldest go first. */
  readonly maxCells?: number;
  readonly logger?: HostLogger;
  readonly now?: () => number;
}

/** A period's hashes are kept this long after it ends: late additions (after an outage) still land. */
const KEEP_AFTER_PERIOD_MS = 7 * 24 * 3600 * 1000;
const DEFAULT_MAX_CELLS = 20_000;
const SWEEP_INTERVAL_MS = 3600 * 1000;

/** The shared spend counters of one plugin. */
export class BudgetCounters {
  readonly #options: BudgetCountersOptions;
  readonly #redis: HostRedis | undefined;
  readonly #guard: RedisGuard | undefined;
  readonly #projectCells = new Map<string, CounterCell>();
  readonly #userCells = new Map<string, UserCell>();
  /** Batches gathering this turn of the event loop's replies, by project and periods. */
  readonly #open = new Map<string, Addition>();
  /** Batches whose call failed (Redis may have applied them): sent again as they are, under their id, once it answers. */
  #uncertain: Addition[] = [];
  /** Batches never sent (Redis was unavailable), merged by key: sent once it answers. */
  readonly #unsent = new Map<string, Addition[]>();
  readonly #reading = new Map<string, Promise<void>>();
  readonly #now: () => number;
  readonly #deadlineMs: number;
  #sweptAt = Number.NEGATIVE_INFINITY;

  constructor(options: BudgetCountersOptions) {
    this.#options = options;
    this.#redis = options.redis;
    this.#now = options.now ?? Date.now;
    this.#deadlineMs = options.deadlineMs ?? REDIS_DEADLINE_MS;
    const redis = options.redis;
    this.#guard = redis
      ? new RedisGuard({
          deadlineMs: this.#deadlineMs,
          probeIntervalMs: options.probeIntervalMs ?? REDIS_PROBE_INTERVAL_MS,
          probe: () => callWithDeadline(redis, this.#deadlineMs, 'PING'),
          logger: options.logger,
          counts: 'budget counters',
        })
      : undefined;
  }

  /** Whether Redis answers the counters' calls (true without a Redis: nothing to wait for). */
  get shared(): boolean {
    return this.#guard?.available ?? true;
  }

  /**
   * The spend of `user` in `projectId` in the given periods, from this instance's view. Reads Redis first (within
   * the deadline) only when there is no view yet or it is older than `maxAgeMs`; a view older than `refreshMs` is
   * read again in the background.
   */
  async spend(projectId: string, user: string, periods: BudgetPeriods): Promise<Spend> {
    const day = this.#cell(projectId, user, 'day', periods.day);
    const month = this.#cell(projectId, user, 'month', periods.month);
    const age = this.#now() - Math.min(day.fetchedAt, month.fetchedAt);
    if (age > Math.min(this.#options.refreshMs, this.#options.maxAgeMs)) {
      const reading = this.#read([day, month]);
      if (age > this.#options.maxAgeMs) {
        await reading;
      }
    }
    return { day: totalsOf(day), month: totalsOf(month) };
  }

  /**
   * Adds a reply's usage to the periods it was recorded in. Redis is told without the caller waiting, once the
   * event loop's turn is over, with the other replies of the project recorded meanwhile.
   */
  add(projectId: string, user: string, periods: BudgetPeriods, tokens: number, cost: number): void {
    const cells = [this.#cell(projectId, user, 'day', periods.day), this.#cell(projectId, user, 'month', periods.month)];
    const delta: Totals = { tokens, cost };
    const redis = this.#redis;
    if (!redis) {
      for (const cell of cells) {
        addTo(cell.shared, delta, 1);
        addTo(cell.project.shared, delta, 1);
      }
      return;
    }
    for (const cell of cells) {
      addTo(cell.local, delta, 1);
      addTo(cell.project.local, delta, 1);
    }
    const key = `${projectId}\n${periods.day.key}\n${periods.month.key}`;
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
      merge(target, user, entry);
    }
  }

  /** Stops probing an unavailable Redis. For shutdown. */
  close(): void {
    this.#guard?.close();
  }

  /** A user's view of one period, made empty the first time (its `fetchedAt` says it was never read). */
  #cell(projectId: string, user: string, period: BudgetPeriod, window: PeriodWindow): UserCell {
    const key = `${window.key}\n${projectId}\n${user}`;
    let cell = this.#userCells.get(key);
    if (cell === undefined) {
      this.#sweepEndedPeriods();
      this.#evictIfFull();
      const redisKey = `${this.#options.keyPrefix}budget:{${projectId}}:${period}:${window.key}`;
      cell = new UserCell(redisKey, user, this.#projectCell(projectId, window));
      if (!this.#redis) {
        cell.fetchedAt = Number.POSITIVE_INFINITY;
      }
      this.#userCells.set(key, cell);
    }
    return cell;
  }

  /** The project's fields of a period's hash: one cell, whichever user's view holds it. */
  #projectCell(projectId: string, window: PeriodWindow): CounterCell {
    const key = `${window.key}\n${projectId}`;
    let cell = this.#projectCells.get(key);
    if (cell === undefined) {
      cell = new CounterCell(window.endsAt + KEEP_AFTER_PERIOD_MS);
      this.#projectCells.set(key, cell);
    }
    return cell;
  }

  /** Reads a user's cells from Redis (one call; concurrent reads of the same cells share it). */
  #read(cells: readonly UserCell[]): Promise<void> {
    const redis = this.#redis;
    const epoch = this.#guard?.shouldAsk();
    if (!redis || epoch === undefined) {
      // Redis does not answer: the view stays what it was, plus what this instance adds.
      this.#markFetched(cells);
      return Promise.resolve();
    }
    const keys = cells.map((cell) => cell.redisKey);
    const user = cells[0].user;
    const scope = `${user}\n${keys.join('\n')}`;
    let reading = this.#reading.get(scope);
    if (reading === undefined) {
      reading = runScript(redis, this.#deadlineMs, READ_SCRIPT, keys, [user])
        .then((answer) => this.#answered(cells, answer))
        .catch((error: unknown) => {
          this.#guard?.failed(epoch, error);
          this.#markFetched(cells);
        })
        .finally(() => this.#reading.delete(scope));
      this.#reading.set(scope, reading);
    }
    return reading;
  }

  /** Sends a batch; Redis's answer (the new totals) becomes the cells' view. A failure keeps it waiting. */
  #send(redis: HostRedis, batch: Addition): void {
    const epoch = this.#guard?.shouldAsk();
    if (epoch === undefined) {
      this.#keepUnsent(batch);
      return;
    }
    const entries = [...batch.entries.entries()];
    const args: (string | number)[] = [ADDITION_ID_TTL_MS, ...batch.expireAt];
    for (const [user, entry] of entries) {
      args.push(user, entry.delta.tokens, entry.delta.cost);
    }
    runScript(redis, this.#deadlineMs, ADD_SCRIPT, [...batch.redisKeys, batch.idKey], args).then(
      (answer) => {
        const now = this.#now();
        const stride = 2 + 2 * entries.length;
        batch.redisKeys.forEach((_key, index) => {
          const at = index * stride;
          entries.forEach(([, entry], position) => {
            const cell = entry.cells[index];
            addTo(cell.local, entry.delta, -1);
            addTo(cell.project.local, entry.delta, -1);
            cell.project.shared.tokens = Number(answer[at] ?? 0);
            cell.project.shared.cost = Number(answer[at + 1] ?? 0);
            cell.shared.tokens = Number(answer[at + 2 + 2 * position] ?? 0);
            cell.shared.cost = Number(answer[at + 3 + 2 * position] ?? 0);
            cell.fetchedAt = now;
          });
        });
      },
      (error: unknown) => {
        this.#guard?.failed(epoch, error);
        this.#uncertain.push(batch);
      },
    );
  }

  /** Sends what waited for Redis, once it answers: the uncertain batches under their own ids, the rest merged. */
  #sendWaiting(redis: HostRedis): void {
    if ((this.#uncertain.length === 0 && this.#unsent.size === 0) || this.#guard?.shouldAsk() === undefined) {
      return;
    }
    const waiting = [...this.#uncertain, ...[...this.#unsent.values()].flat()];
    this.#uncertain = [];
    this.#unsent.clear();
    for (const batch of waiting) {
      this.#send(redis, batch);
    }
  }

  /** Takes Redis's totals (four per hash: the project's tokens and cost, the user's) as the cells' view. */
  #answered(cells: readonly UserCell[], answer: readonly unknown[]): void {
    const now = this.#now();
    cells.forEach((cell, index) => {
      const at = index * 4;
      cell.project.shared.tokens = Number(answer[at] ?? 0);
      cell.project.shared.cost = Number(answer[at + 1] ?? 0);
      cell.shared.tokens = Number(answer[at + 2] ?? 0);
      cell.shared.cost = Number(answer[at + 3] ?? 0);
      cell.fetchedAt = now;
    });
  }

  #markFetched(cells: readonly UserCell[]): void {
    const now = this.#now();
    for (const cell of cells) {
      cell.fetchedAt = now;
    }
  }

  /**
   * Keeps the users' views within `maxCells`: the oldest go first, never one whose additions are not in Redis yet.
   * Without Redis the cells are the counts themselves, so none goes before its period is over.
   */
  #evictIfFull(): void {
    if (!this.#redis) {
      return;
    }
    const maxCells = this.#options.maxCells ?? DEFAULT_MAX_CELLS;
    for (const [key, cell] of this.#userCells) {
      if (this.#userCells.size < maxCells) {
        return;
      }
      if (!cell.holdsAdditions) {
        this.#userCells.delete(key);
      }
    }
  }

  /**
   * Forgets the views of periods that ended a week ago (at most once an hour), except those whose additions are
   * not in Redis yet, and the project cells no user's view holds any more.
   */
  #sweepEndedPeriods(): void {
    const now = this.#now();
    if (now - this.#sweptAt < SWEEP_INTERVAL_MS) {
      return;
    }
    this.#sweptAt = now;
    const held = new Set<CounterCell>();
    for (const [key, cell] of this.#userCells) {
      if (cell.expireAt < now && !cell.holdsAdditions) {
        this.#userCells.delete(key);
      } else {
        held.add(cell.project);
      }
    }
    for (const [key, cell] of this.#projectCells) {
      // Without Redis a cell is the count itself: it goes only once its period is long over.
      if (!held.has(cell) && (this.#redis !== undefined || cell.expireAt < now)) {
        this.#projectCells.delete(key);
      }
    }
  }
}

/** The spend a budget of `scope` compares: the project's, or the user's own. */
export function spentOf(totals: SpendTotals, scope: BudgetScope, measure: 'tokens' | 'cost'): number {
  if (scope === 'project') {
    return measure === 'tokens' ? totals.projectTokens : totals.projectCost;
  }
  return measure === 'tokens' ? totals.userTokens : totals.userCost;
}
