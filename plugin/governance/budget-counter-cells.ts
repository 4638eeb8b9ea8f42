/**
 * What an instance keeps of the shared budget counters (budget-counters.ts): per period, a cell for the project's
 * fields of its Redis hash and one for each user's, each with Redis's last answer and what this instance added
 * since; and the batches that carry additions to Redis.
 */
import type { SpendTotals } from './budget-counters.ts';

/** Tokens and cost (nano-dollars). */
export interface Totals {
  tokens: number;
  cost: number;
}

/** One pair of fields of a period's hash, as this instance knows it: the project's, or one user's. */
export class CounterCell {
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
export class UserCell extends CounterCell {
  /** When Redis was last read for this view (its additions' answers update the totals, not this). */
  fetchedAt = Number.NEGATIVE_INFINITY;
  /** What the other instances hold for turns still running, the project's and the user's, as last read. */
  othersHeld: { readonly project: Totals; readonly user: Totals } = { project: { tokens: 0, cost: 0 }, user: { tokens: 0, cost: 0 } };
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

/** What one user adds to a batch: their day's and month's cells, and the sum of their replies' usage. */
export interface BatchEntry {
  readonly cells: readonly UserCell[];
  readonly delta: Totals;
}

/**
 * Replies' usage on its way to Redis, one project's in one day and month: every reply recorded in the same turn of
 * the event loop goes in one script call, by user, under one id.
 */
export interface Addition {
  /** The project and periods (`<project>\n<day>\n<month>`): batches of one key may be merged before they are sent. */
  readonly key: string;
  readonly idKey: string;
  /** The day's and the month's hash. */
  readonly redisKeys: readonly string[];
  readonly expireAt: readonly number[];
  readonly entries: Map<string, BatchEntry>;
  /** The earliest `sent` (epoch ms) of the batch's replies: a hash the batch creates counts from then. */
  earliest: number;
}

/** Users in one batch, at most (the script passes each user's fields to one HMGET). */
export const MAX_BATCH_USERS = 500;

/** A user's cell as the check reads it: the project's totals and the user's own. */
export function totalsOf(cell: UserCell): SpendTotals {
  const project = cell.project.total();
  const user = cell.total();
  return { projectTokens: project.tokens, projectCost: project.cost, userTokens: user.tokens, userCost: user.cost };
}

export function addTo(totals: Totals, delta: Totals, sign: 1 | -1): void {
  totals.tokens += sign * delta.tokens;
  totals.cost += sign * delta.cost;
}

/** Whether a batch has no room for one more user (it always has for one it holds). */
export function isFull(batch: Addition, user: string): boolean {
  return batch.entries.size >= MAX_BATCH_USERS && !batch.entries.has(user);
}

/** Adds a user's usage to a batch. */
export function merge(batch: Addition, user: string, addition: BatchEntry): void {
  const entry = batch.entries.get(user);
  if (entry === undefined) {
    batch.entries.set(user, { cells: addition.cells, delta: { ...addition.delta } });
  } else {
    addTo(entry.delta, addition.delta, 1);
  }
}
