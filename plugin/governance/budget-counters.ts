/**
 * The spend budgets are checked against, shared by every instance through the host's Redis, and each instance's
 * cached view of it, so that checking a turn is a lookup in memory, never a wait for Redis.
 *
 * In Redis, one hash per project and period (`<prefix>budget:{<project>}:day:2026-01-23`, `...:month:2026-01`)
 * holds the project's `tokens` and `cost` (nano-dollars) and each user's `tokens:<profile>` and `cost:<profile>`.
 * A recorded reply adds its usage with one script (budget-redis.ts: HINCRBY on the day's and the month's hash,
 * once per addition id; its answer is the new totals), not awaited by the turn. A check reads this instance's view
 * of the two hashes (a cell for the project's fields and one for the user's, per period): Redis's last answer,
 * plus what this instance added since. A view older than `refreshMs` is read again in the background (the turn
 * does not wait); one older than `maxAgeMs` (a user idle for a while), or none at all, is read before the check,
 * within the deadline.
 *
 * Every Redis call has a deadline and is not made while the client is not connected; one that misses it marks Redis
 * unavailable (the RedisGuard of the device limits, devices/redis-guard.ts). Meanwhile the spend counts in this
 * instance's memory on top of the last view, and each addition is kept and sent again once Redis answers (its id
 * keeps one that was applied after all from counting twice). Without a Redis, the counters are this instance's own.
 */
import { randomUUID } from 'node:crypto';
import type { HostLogger, HostRedis } from '../host.ts';
import { RedisGuard } from '../devices/redis-guard.ts';
import { REDIS_DEADLINE_MS, REDIS_PROBE_INTERVAL_MS } from '../devices/limiter-store.ts';
import type { BudgetPeriods, PeriodWindow } from './budget-periods.ts';
import { ADD_SCRIPT, ADDITION_ID_TTL_MS, callWithDeadline, READ_SCRIPT } from './budget-redis.ts';
import type { BudgetPeriod, BudgetScope } from './project-governance-settings.ts';

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

/** Tokens and cost (nano-dollars). */
interface Totals {
  tokens: number;
  cost: number;
}

/** One pair of fields of a period's hash, as this instance knows it: the project's, or one user's. */
class CounterCell {
  /** When Redis may forget the hash (epoch ms): its period's end and a week. */
  readonly expireAt: number;
  /** The last totals Redis answered (without Redis: everything counted here). */
  readonly shared: Totals = { tokens: 0, cost: 0 };
  /** Added here and not yet in `shared`: sent and unanswered, or waiting for Redis. */
  readonly local: Totals = { tokens: 0, cost: 0 };

  constructor(expireAt: number) {
    this.expireAt = expireAt;
  }

  /** What the check compares: `shared` and `local` together. */
  total(): Totals {
    return { tokens: this.shared.tokens + this.local.tokens, cost: this.shared.cost + this.local.cost };
  }

  /** Whether anything added here is not in Redis yet. */
  get holdsAdditions(): boolean {
    return this.local.tokens !== 0 || this.local.cost !== 0;
  }
}

/** A user's fields of a period's hash, with the cell of the project's fields of the same hash. */
class UserCell extends CounterCell {
  fetchedAt = Number.NEGATIVE_INFINITY;
  readonly redisKey: string;
  readonly user: string;
  readonly project: CounterCell;

  constructor(redisKey: string, user: string, project: CounterCell) {
    super(project.expireAt);
    this.redisKey = redisKey;
    this.user = user;
    this.project = project;
  }
}

/** One reply's usage on its way to Redis: its day's and month's cells (one user's), and its id. */
interface Addition {
  readonly id: string;
  readonly idKey: string;
  readonly cells: readonly UserCell[];
  readonly delta: Totals;
}

/** The shared spend counters of one plugin. */
export class BudgetCounters {
  readonly #options: BudgetCountersOptions;
  readonly #redis: HostRedis | undefined;
  readonly #guard: RedisGuard | undefined;
  readonly #projectCells = new Map<string, CounterCell>();
  readonly #userCells = new Map<string, UserCell>();
  /** Additions whose call failed, sent again once Redis answers. */
  #waiting: Addition[] = [];
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

  /** Adds a reply's usage to the periods it was recorded in; Redis is told without the caller waiting. */
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
    const id = randomUUID();
    this.#send(redis, { id, idKey: `${this.#options.keyPrefix}budget:{${projectId}}:addition:${id}`, cells, delta });
    this.#sendWaiting(redis);
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
      reading = callWithDeadline(redis, this.#deadlineMs, 'EVAL', READ_SCRIPT, cells.length, ...keys, user)
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

  /** Sends an addition; Redis's answer (the new totals) becomes the cells' view. A failure keeps it waiting. */
  #send(redis: HostRedis, addition: Addition): void {
    const epoch = this.#guard?.shouldAsk();
    if (epoch === undefined) {
      this.#waiting.push(addition);
      return;
    }
    const { cells, delta } = addition;
    const args: (string | number)[] = [cells[0].user, ADDITION_ID_TTL_MS];
    for (const cell of cells) {
      args.push(delta.tokens, delta.cost, cell.expireAt);
    }
    const keys = [...cells.map((cell) => cell.redisKey), addition.idKey];
    callWithDeadline(redis, this.#deadlineMs, 'EVAL', ADD_SCRIPT, keys.length, ...keys, ...args).then(
      (answer) => {
        for (const cell of cells) {
          addTo(cell.local, delta, -1);
          addTo(cell.project.local, delta, -1);
        }
        this.#answered(cells, answer);
      },
      (error: unknown) => {
        this.#guard?.failed(epoch, error);
        this.#waiting.push(addition);
      },
    );
  }

  /** Sends again what waited for Redis, once it answers. */
  #sendWaiting(redis: HostRedis): void {
    if (this.#waiting.length === 0 || this.#guard?.shouldAsk() === undefined) {
      return;
    }
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const addition of waiting) {
      this.#send(redis, addition);
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

/** A user's cell as the check reads it: the project's totals and the user's own. */
function totalsOf(cell: UserCell): SpendTotals {
  const project = cell.project.total();
  const user = cell.total();
  return { projectTokens: project.tokens, projectCost: project.cost, userTokens: user.tokens, userCost: user.cost };
}

function addTo(totals: Totals, delta: Totals, sign: 1 | -1): void {
  totals.tokens += sign * delta.tokens;
  totals.cost += sign * delta.cost;
}
