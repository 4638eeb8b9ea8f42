/**
 * The spend budgets are checked against, shared by every instance through the host's Redis, and each instance's
 * cached view of it, so that checking a turn is a lookup in memory, never a wait for Redis.
 *
 * In Redis, one hash per project and period (`<prefix>budget:{<project>}:day:2026-01-23`, `...:month:2026-01`)
 * holds the project's `tokens` and `cost` (nano-dollars) and each user's `tokens:<profile>` and `cost:<profile>`.
 * Recorded replies add their usage with one script per project and turn of the event loop (budget-additions.ts:
 * HINCRBY on the day's and the month's hash, once per batch id; its answer is the new totals), not awaited by the
 * turn. A check reads this instance's view of the two hashes (budget-counter-cells.ts: a cell for the project's
 * fields and one for the user's, per period): Redis's last answer, plus what this instance added since; and the
 * budget held for turns still running (budget-holds.ts): this instance's own, and the other instances' as last
 * read. A view older than `refreshMs` is read again in the background (the turn does not wait); one older than
 * `maxAgeMs` (a user idle for a while), or none at all, is read before the check, within the deadline.
 *
 * Counters that have nothing to go on start from the usage recorded on the stored replies (budget-seed.ts): without
 * Redis, a project's at its first check in the process; with Redis, a period's hash that is missing (Redis lost
 * it, or the period just began) or that additions created since (they mark it with the earliest `sent` they count),
 * at the first read that finds it so.
 *
 * Every Redis call has a deadline and is not made while the client is not connected; one that misses it marks Redis
 * unavailable (the RedisGuard of the device limits, devices/redis-guard.ts). Meanwhile the spend counts in this
 * instance's memory on top of the last view, and each batch is kept and sent again once Redis answers (its id
 * keeps one that was applied after all from counting twice). Without a Redis, the counters are this instance's own.
 */
import { AppError } from '../errors.ts';
import type { HostLogger, HostRedis } from '../host.ts';
import { RedisGuard } from '../devices/redis-guard.ts';
import { REDIS_DEADLINE_MS, REDIS_PROBE_INTERVAL_MS } from '../devices/limiter-store.ts';
import type { BudgetPeriods, PeriodWindow } from './budget-periods.ts';
import { callWithDeadline, READ_SCRIPT, runScript } from './budget-redis.ts';
import { BudgetAdditions } from './budget-additions.ts';
import { BudgetHolds } from './budget-holds.ts';
import { MemorySeeds, periodStart, seedHashes, type BudgetSeeder, type HashToSeed, type RecordedSpend } from './budget-seed.ts';
import type { BudgetPeriod, BudgetScope } from './project-governance-settings.ts';
import { addTo, CounterCell, totalsOf, UserCell, type Totals } from './budget-counter-cells.ts';

/** Tokens and cost (nano-dollars) of the project and of one user, in one period. */
export interface SpendTotals {
  readonly projectTokens: number;
  readonly projectCost: number;
  readonly userTokens: number;
  readonly userCost: number;
}

/** A user's view of the spend in the current day and month, and of the budget held for turns still running. */
export interface Spend {
  readonly day: SpendTotals;
  readonly month: SpendTotals;
  /** Held for turns still running (they count in the day and the month alike): this instance's, and the others'. */
  readonly held: SpendTotals;
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
  /** Reads the usage recorded on the stored replies, where the counters start from (none: they start from zero). */
  readonly seeder?: BudgetSeeder;
  /** How long an instance's holdings stay in Redis without being renewed (budget-holds.ts). */
  readonly holdTtlMs?: number;
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
  /** With Redis: the replies' usage on its way there. */
  readonly #additions: BudgetAdditions | undefined;
  readonly #reading = new Map<string, Promise<void>>();
  readonly #now: () => number;
  readonly #deadlineMs: number;
  readonly #holds: BudgetHolds;
  /** Without Redis: where each project's counters start from. */
  readonly #memorySeeds: MemorySeeds | undefined;
  /** With Redis: the seeding of a project's hashes under way on this instance. */
  readonly #seeding = new Map<string, Promise<void>>();
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
    this.#holds = new BudgetHolds({ redis, guard: this.#guard, keyPrefix: options.keyPrefix, deadlineMs: this.#deadlineMs, ttlMs: options.holdTtlMs, now: this.#now });
    this.#additions = redis && this.#guard ? new BudgetAdditions({ redis, guard: this.#guard, keyPrefix: options.keyPrefix, deadlineMs: this.#deadlineMs, now: this.#now }) : undefined;
    this.#memorySeeds = !redis && options.seeder ? new MemorySeeds(options.seeder, this.#now) : undefined;
  }

  /** Whether Redis answers the counters' calls (true without a Redis: nothing to wait for). */
  get shared(): boolean {
    return this.#guard?.available ?? true;
  }

  /**
   * The spend of `user` in `projectId` in the given periods, from this instance's view. Reads Redis first (within
   * the deadline) only when there is no view yet or it is older than `maxAgeMs`; a view older than `refreshMs` is
   * read again in the background. Counters with nothing to go on are seeded first (the turn waits); a store that
   * cannot be read for it is a 503 `unavailable`.
   */
  async spend(projectId: string, user: string, periods: BudgetPeriods): Promise<Spend> {
    if (this.#memorySeeds) {
      await this.#memorySeeds.ready(projectId, (seeded, month, day) => {
        this.#addSeed(projectId, 'month', seeded.month, month);
        this.#addSeed(projectId, 'day', seeded.day, day);
      });
    }
    const day = this.#cell(projectId, user, 'day', periods.day);
    const month = this.#cell(projectId, user, 'month', periods.month);
    const age = this.#now() - Math.min(day.fetchedAt, month.fetchedAt);
    if (age > Math.min(this.#options.refreshMs, this.#options.maxAgeMs)) {
      const reading = this.#read(projectId, periods, [day, month]);
      if (age > this.#options.maxAgeMs) {
        await reading;
      } else {
        reading.catch(() => undefined);
      }
    }
    return this.view(projectId, user, periods);
  }

  /** The spend of `user` in `projectId` as this instance sees it now, without asking Redis. */
  view(projectId: string, user: string, periods: BudgetPeriods): Spend {
    const day = this.#cell(projectId, user, 'day', periods.day);
    const own = this.#holds.of(projectId, user);
    const others = day.othersHeld;
    return {
      day: totalsOf(day),
      month: totalsOf(this.#cell(projectId, user, 'month', periods.month)),
      held: {
        projectTokens: own.project.tokens + others.project.tokens,
        projectCost: own.project.cost + others.project.cost,
        userTokens: own.user.tokens + others.user.tokens,
        userCost: own.user.cost + others.user.cost,
      },
    };
  }

  /** Holds `amount` for one of `user`'s turns still running; returns what gives it back (once). */
  hold(projectId: string, user: string, amount: Totals): () => void {
    return this.#holds.hold(projectId, user, amount);
  }

  /**
   * Adds a reply's usage to the periods it was recorded in (`sent`, epoch ms: when it was). Redis is told without
   * the caller waiting, once the event loop's turn is over, with the other replies of the project recorded meanwhile.
   */
  add(projectId: string, user: string, periods: BudgetPeriods, tokens: number, cost: number, sent: number = this.#now()): void {
    const additions = this.#additions;
    if (!additions) {
      // Before its seed, a project's replies are left to the seed, which reads them from the store.
      if (!this.#memorySeeds || this.#memorySeeds.counts(projectId)) {
        this.#addInMemory(projectId, user, periods, { tokens, cost });
      }
      return;
    }
    additions.add(projectId, user, [this.#cell(projectId, user, 'day', periods.day), this.#cell(projectId, user, 'month', periods.month)], { tokens, cost }, sent);
  }

  /**
   * Adds the usage of a reply a recovery recorded (its turn's process had stopped), counted once: `counted` when that
   * process had counted it already (a reply the store had refused, waiting in the outbox; with Redis, that count
   * survived the process).
   */
  addRecovered(projectId: string, user: string, periods: BudgetPeriods, spent: Totals & { readonly replyId: string; readonly sent: number; readonly counted: boolean }): void {
    if (!this.#redis) {
      const add = (): void => this.#addInMemory(projectId, user, periods, spent);
      if (this.#memorySeeds) {
        this.#memorySeeds.recovered(projectId, spent.replyId, add);
      } else {
        add();
      }
      return;
    }
    if (!spent.counted) {
      this.add(projectId, user, periods, spent.tokens, spent.cost, spent.sent);
    }
  }

  #addInMemory(projectId: string, user: string, periods: BudgetPeriods, delta: Totals): void {
    for (const cell of [this.#cell(projectId, user, 'day', periods.day), this.#cell(projectId, user, 'month', periods.month)]) {
      addTo(cell.shared, delta, 1);
      addTo(cell.project.shared, delta, 1);
    }
  }

  /** Without Redis: a project's counters of one period start from what its seed read. */
  #addSeed(projectId: string, period: BudgetPeriod, window: PeriodWindow, spend: RecordedSpend): void {
    addTo(this.#projectCell(projectId, window).shared, spend.project, 1);
    for (const [user, totals] of spend.users) {
      addTo(this.#cell(projectId, user, period, window).shared, totals, 1);
    }
  }

  /** Stops probing an unavailable Redis and renewing the holdings. For shutdown. */
  close(): void {
    this.#guard?.close();
    this.#holds.close();
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

  /**
   * Reads a user's cells, and what the other instances hold, from Redis (one call; concurrent reads of the same cells
   * share it). A hash that needs seeding is seeded first, and read again; until then the view stays what it was.
   * Rejects only when the store cannot be read for a seed (`seedUnavailable`); a Redis that fails leaves the view as
   * it was.
   */
  #read(projectId: string, periods: BudgetPeriods, cells: readonly [UserCell, UserCell]): Promise<void> {
    const redis = this.#redis;
    const epoch = this.#guard?.shouldAsk();
    if (!redis || epoch === undefined) {
      // Redis does not answer: the view stays what it was, plus what this instance adds.
      this.#markFetched(cells);
      return Promise.resolve();
    }
    const user = cells[0].user;
    const keys = [cells[0].redisKey, cells[1].redisKey, this.#holds.holdersKey(projectId)];
    const scope = `${user}\n${keys.join('\n')}`;
    let reading = this.#reading.get(scope);
    if (reading === undefined) {
      const read = (): Promise<unknown[]> => runScript(redis, this.#deadlineMs, READ_SCRIPT, keys, [user, this.#holds.instanceId, this.#now(), this.#holds.holdingsPrefix(projectId)]);
      reading = read()
        .then(async (answer) => {
          const toSeed = this.#options.seeder ? hashesToSeed(cells, periods, answer, this.#now()) : [];
          this.#answered(cells, toSeed.length > 0 ? await this.#seedThenRead(redis, projectId, toSeed, read) : answer);
        })
        .catch((error: unknown) => {
          if (AppError.isInstance(error)) {
            throw error;
          }
          this.#guard?.failed(epoch, error);
          this.#markFetched(cells);
        })
        .finally(() => this.#reading.delete(scope));
      this.#reading.set(scope, reading);
    }
    return reading;
  }

  /** Seeds a project's hashes (once at a time on this instance), then reads the view again. */
  async #seedThenRead(redis: HostRedis, projectId: string, hashes: readonly HashToSeed[], read: () => Promise<unknown[]>): Promise<unknown[]> {
    const seeder = this.#options.seeder as BudgetSeeder;
    const key = hashes.map((hash) => hash.key).join('\n');
    let seeding = this.#seeding.get(key);
    if (seeding === undefined) {
      seeding = seedHashes(redis, this.#deadlineMs, seeder, projectId, hashes).finally(() => this.#seeding.delete(key));
      this.#seeding.set(key, seeding);
    }
    await seeding;
    return read();
  }

  /**
   * Takes Redis's answer as the cells' view: four totals per hash (the project's tokens and cost, the user's), then
   * the four the other instances hold.
   */
  #answered(cells: readonly UserCell[], answer: readonly unknown[]): void {
    const now = this.#now();
    const number = (index: number): number => Number(answer[index] ?? 0);
    const othersHeld = { project: { tokens: number(8), cost: number(9) }, user: { tokens: number(10), cost: number(11) } };
    cells.forEach((cell, index) => {
      const at = index * 4;
      cell.project.shared.tokens = number(at);
      cell.project.shared.cost = number(at + 1);
      cell.shared.tokens = number(at + 2);
      cell.shared.cost = number(at + 3);
      cell.othersHeld = othersHeld;
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

/** The hashes of a read's answer that need seeding (-1: none; 0: missing, seeded up to now; else up to its `from`). */
function hashesToSeed(cells: readonly [UserCell, UserCell], periods: BudgetPeriods, answer: readonly unknown[], now: number): HashToSeed[] {
  const hashes: HashToSeed[] = [];
  [periods.day, periods.month].forEach((window, index) => {
    const need = Number(answer[12 + index] ?? -1);
    if (need !== -1) {
      hashes.push({ key: cells[index].redisKey, start: periodStart(window), cutoff: need === 0 ? now : need, expireAt: cells[index].expireAt });
    }
  });
  return hashes;
}
