/**
 * Where a project's budget counters start from when they have nothing to go on: the usage recorded on its stored
 * replies, summed as the usage report sums it (usage-report.ts), so that a restart (without Redis, the counters are
 * the process's own) or a Redis that lost its keys never resets a budget.
 *
 * Seeding is lazy, per project: the first check of a project with budgets after a start (or after Redis lost the
 * project's counters) reads the month's replies so far, one search per 1,000 of them, and the turns of that project
 * wait for it; projects without budgets, and projects nobody uses, cost nothing. Seeding every project at start-up
 * instead would hold the start up for as many searches as all projects' replies of the month need.
 */
import type { FhirRepository } from '@medplum/fhir-router';
import { AppError } from '../errors.ts';
import type { HostRedis } from '../host.ts';
import type { Totals } from './budget-counter-cells.ts';
import { periodsAt, type BudgetPeriods, type PeriodWindow } from './budget-periods.ts';
import { runScript, SEED_SCRIPT } from './budget-redis.ts';
import { forEachRecordedReply } from './usage-report.ts';

/** A stretch of time, `from` included and `to` not (epoch ms). */
export interface SeedWindow {
  readonly from: number;
  readonly to: number;
}

/** The usage recorded in one window: the project's, and each user's. */
export interface RecordedSpend {
  readonly project: Totals;
  readonly users: Map<string, Totals>;
}

/** What a seeding read found. */
export interface SeedResult {
  /** The spend of each window asked for, in order. */
  readonly windows: readonly RecordedSpend[];
  /**
   * The ids of the replies counted that did not complete (those a recovery may write while the read runs, and
   * tell the counters of again: budget-counters.ts counts them once).
   */
  readonly unfinished: ReadonlySet<string>;
}

/** Reads the spend recorded on `projectId`'s stored replies in each window. */
export type BudgetSeeder = (projectId: string, windows: readonly SeedWindow[]) => Promise<SeedResult>;

/** A seeder over the stored replies, read with each project's system repository. */
export function storedRepliesSeeder(systemRepo: (projectId: string) => Promise<FhirRepository>, categorySystem: string): BudgetSeeder {
  return async (projectId, windows) => {
    const spends = windows.map((): RecordedSpend => ({ project: { tokens: 0, cost: 0 }, users: new Map() }));
    const unfinished = new Set<string>();
    if (windows.length === 0) {
      return { windows: spends, unfinished };
    }
    const from = Math.min(...windows.map((window) => window.from));
    const to = Math.max(...windows.map((window) => window.to));
    await forEachRecordedReply(await systemRepo(projectId), categorySystem, new Date(from).toISOString(), new Date(to).toISOString(), (reply) => {
      if (reply.status !== 'completed') {
        unfinished.add(reply.id);
      }
      if (reply.usage === undefined) {
        return;
      }
      const spent: Totals = { tokens: reply.usage.prompt + reply.usage.completion, cost: reply.usage.cost };
      windows.forEach((window, index) => {
        if (reply.sentAt >= window.from && reply.sentAt < window.to) {
          addSpend(spends[index], reply.user, spent);
        }
      });
    });
    return { windows: spends, unfinished };
  };
}

/** Adds `spent` to the project's and to `user`'s sums. */
export function addSpend(spend: RecordedSpend, user: string, spent: Totals): void {
  spend.project.tokens += spent.tokens;
  spend.project.cost += spent.cost;
  const sums = spend.users.get(user) ?? { tokens: 0, cost: 0 };
  sums.tokens += spent.tokens;
  sums.cost += spent.cost;
  spend.users.set(user, sums);
}

/** The check's answer when the stored replies cannot be read to start a project's counters: 503, nothing stored. */
export function seedUnavailable(cause: unknown): AppError {
  return new AppError('unavailable', "The project's budgets cannot be checked: the spend recorded so far could not be read. Nothing was stored; retry shortly.", {
    cause,
    isRetryable: true,
    retryAfterSeconds: 1,
  });
}

/** Reads the spend of `windows`, a failure being `seedUnavailable`. */
async function readSeed(seeder: BudgetSeeder, projectId: string, windows: readonly SeedWindow[]): Promise<SeedResult> {
  try {
    return await seeder(projectId, windows);
  } catch (error) {
    throw seedUnavailable(error);
  }
}

/** The start (epoch ms) of a period, from its key (`2026-01-23` or `2026-01`). */
export function periodStart(window: PeriodWindow): number {
  return Date.parse(window.key.length === 7 ? `${window.key}-01T00:00:00.000Z` : `${window.key}T00:00:00.000Z`);
}

interface MemorySeed {
  /** Until the seed is read; undefined once it is. */
  reading: Promise<void> | undefined;
  /** Recovered replies told while the seed is read, by id: counted once it is, unless it read them. */
  readonly pending: Map<string, () => void>;
  /** The seed's replies that did not complete (recoveries write such replies). */
  unfinished: ReadonlySet<string>;
}

/**
 * Without Redis: each project's counters start, once per process, from the usage recorded on its stored replies
 * of the month so far (and the day's), read at the project's first check. Additions before that are left out, as
 * the seed reads their replies from the store; from the moment the seed is read up to, they count.
 */
export class MemorySeeds {
  readonly #seeder: BudgetSeeder;
  readonly #now: () => number;
  readonly #seeds = new Map<string, MemorySeed>();

  constructor(seeder: BudgetSeeder, now: () => number) {
    this.#seeder = seeder;
    this.#now = now;
  }

  /**
   * Resolves once `projectId`'s counters hold what was recorded before they started counting: `apply` is given the
   * month's spend, then the day's, of the periods the seed was read in. Rejects with `seedUnavailable` when the
   * store cannot say (the next check tries again).
   */
  async ready(projectId: string, apply: (periods: BudgetPeriods, month: RecordedSpend, day: RecordedSpend) => void): Promise<void> {
    let seed = this.#seeds.get(projectId);
    if (seed === undefined) {
      const cutoff = this.#now();
      const periods = periodsAt(cutoff);
      const started: MemorySeed = { reading: undefined, pending: new Map(), unfinished: new Set() };
      started.reading = readSeed(this.#seeder, projectId, [
        { from: periodStart(periods.month), to: cutoff },
        { from: periodStart(periods.day), to: cutoff },
      ]).then(
        (result) => {
          apply(periods, result.windows[0], result.windows[1]);
          started.unfinished = result.unfinished;
          started.reading = undefined;
          for (const [replyId, add] of started.pending) {
            if (!result.unfinished.has(replyId)) {
              add();
            }
          }
          started.pending.clear();
        },
        (error: unknown) => {
          this.#seeds.delete(projectId);
          throw error;
        },
      );
      seed = started;
      this.#seeds.set(projectId, seed);
    }
    await seed.reading;
  }

  /** Whether an addition to `projectId` counts: once its seed began (what came before is in what the seed reads). */
  counts(projectId: string): boolean {
    return this.#seeds.has(projectId);
  }

  /**
   * A reply a recovery wrote (its turn's process had stopped): `add` counts it, unless the project's seed read it or
   * will (a seed not begun reads it from the store; one being read may have: decided once it is).
   */
  recovered(projectId: string, replyId: string, add: () => void): void {
    const seed = this.#seeds.get(projectId);
    if (seed === undefined) {
      return;
    }
    if (seed.reading !== undefined) {
      seed.pending.set(replyId, add);
    } else if (!seed.unfinished.has(replyId)) {
      add();
    }
  }
}

/** A period's hash in Redis that needs seeding: counted from `start` to `cutoff`. */
export interface HashToSeed {
  readonly key: string;
  readonly start: number;
  cutoff: number;
  readonly expireAt: number;
}

// A hash that keeps getting additions from before its cutoff is seeded at most this many times over, then left for
// the next read.
const SEED_TRIES = 3;

/**
 * With Redis: seeds each hash with the usage recorded from its period's start up to its cutoff (the moment it was
 * found missing, or the earliest reply counted in it since); the first instance's seed wins (SEED_SCRIPT). Redis
 * failures are thrown as they are; a store that cannot be read, as `seedUnavailable`.
 */
export async function seedHashes(redis: HostRedis, deadlineMs: number, seeder: BudgetSeeder, projectId: string, hashes: readonly HashToSeed[]): Promise<void> {
  let waiting = [...hashes];
  for (let attempt = 0; attempt < SEED_TRIES && waiting.length > 0; attempt++) {
    const result = await readSeed(seeder, projectId, waiting.map((hash) => ({ from: hash.start, to: hash.cutoff })));
    const again: HashToSeed[] = [];
    for (const [index, hash] of waiting.entries()) {
      const spend = result.windows[index];
      const fields: (string | number)[] = ['tokens', spend.project.tokens, 'cost', spend.project.cost];
      for (const [user, totals] of spend.users) {
        fields.push(`tokens:${user}`, totals.tokens, `cost:${user}`, totals.cost);
      }
      const [answer] = await runScript(redis, deadlineMs, SEED_SCRIPT, [hash.key], [hash.cutoff, hash.expireAt, ...fields]);
      if (Number(answer) !== -1) {
        hash.cutoff = Number(answer);
        again.push(hash);
      }
    }
    waiting = again;
  }
}
