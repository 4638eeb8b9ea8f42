/**
 * What a search's SQL condition (its filters' and the caller's AccessPolicy's checks: search-plan.ts) said of a
 * resource version, so that a page read again at the next turn (a conversation's history, a patient's chart) is not
 * checked again row by row. Each check is an `EXISTS` probe of the version's index rows; with a policy of a few
 * alternatives and a side-request exclusion a candidate costs several probes, and in a store larger than SQLite's
 * page cache each lands on a page read from the file again.
 *
 * A verdict is kept by the resource's row, its version id and the condition (its SQL and parameters). It never goes
 * stale: a version's index rows and its columns (`resource_type`, `deleted`, `project`, `last_updated`) are written
 * with it and never change (a new version, a delete included, has a new version id; a rolled-back write's row may be
 * given to another resource, but never with the same version id), and a condition reads nothing else. The index
 * rows are a function of the version's content and the store's list of indexed parameters: the store drops every
 * verdict when that list changes (resource-store.ts, `ensureIndex` and `indexMatches`).
 *
 * Bounded by the verdicts it holds and by the conditions it knows; past either bound, the conditions used least
 * recently are forgotten whole.
 */
import type { SqlFragment } from './search-plan.ts';

/** The verdicts kept in all: about 120 bytes each. */
export const MAX_VERDICTS = 32_768;
/** The conditions kept, with or without verdicts (a condition's key is its SQL, a few KB). */
export const MAX_CONDITIONS = 512;

/** A version's verdict: the version id it was given for, and whether the condition held. */
interface Verdict {
  readonly versionId: string;
  readonly holds: boolean;
}

/** The verdicts of one condition, by the resource's row. */
export class ConditionVerdicts {
  readonly #verdicts = new Map<number, Verdict>();
  readonly #onAdd: () => void;
  /** Forgotten by the cache: a search still holding it keeps nothing more in it. */
  #detached = false;

  constructor(onAdd: () => void) {
    this.#onAdd = onAdd;
  }

  get size(): number {
    return this.#verdicts.size;
  }

  /** Whether the condition holds for the version `versionId` of the row `pk`; undefined when not known. */
  get(pk: number, versionId: string): boolean | undefined {
    const verdict = this.#verdicts.get(pk);
    return verdict !== undefined && verdict.versionId === versionId ? verdict.holds : undefined;
  }

  clear(): void {
    this.#verdicts.clear();
  }

  detach(): void {
    this.#detached = true;
    this.#verdicts.clear();
  }

  set(pk: number, versionId: string, holds: boolean): void {
    if (this.#detached) {
      return;
    }
    const before = this.#verdicts.size;
    this.#verdicts.set(pk, { versionId, holds });
    if (this.#verdicts.size > before) {
      this.#onAdd();
    }
  }
}

export class VerdictCache {
  /** By condition, least recently used first. */
  readonly #conditions = new Map<string, ConditionVerdicts>();
  readonly #maxVerdicts: number;
  #size = 0;

  readonly #maxConditions: number;

  constructor(maxVerdicts = MAX_VERDICTS, maxConditions = MAX_CONDITIONS) {
    this.#maxVerdicts = maxVerdicts;
    this.#maxConditions = maxConditions;
  }

  /** Verdicts held, over every condition. */
  get size(): number {
    return this.#size;
  }

  /** The verdicts of `condition`, made when none are kept. */
  of(condition: SqlFragment): ConditionVerdicts {
    const key = conditionKey(condition);
    let verdicts = this.#conditions.get(key);
    if (verdicts) {
      this.#conditions.delete(key);
    } else {
      verdicts = new ConditionVerdicts(() => this.#added());
      if (this.#conditions.size >= this.#maxConditions) {
        this.#forgetOldest();
      }
    }
    this.#conditions.set(key, verdicts);
    return verdicts;
  }

  /** Forgets every verdict (the store's indexed parameters changed). */
  clear(): void {
    for (const verdicts of this.#conditions.values()) {
      verdicts.detach();
    }
    this.#conditions.clear();
    this.#size = 0;
  }

  /** Forgets the condition used least recently, with its verdicts. */
  #forgetOldest(): void {
    const [oldest, verdicts] = this.#conditions.entries().next().value as [string, ConditionVerdicts];
    this.#conditions.delete(oldest);
    this.#size -= verdicts.size;
    verdicts.detach();
  }

  #added(): void {
    this.#size++;
    // The least recently used conditions go whole; the one in use is the last, and stays.
    while (this.#size > this.#maxVerdicts && this.#conditions.size > 1) {
      this.#forgetOldest();
    }
    if (this.#size > this.#maxVerdicts) {
      // One condition alone over the bound: it starts again.
      const [current] = this.#conditions.values();
      current?.clear();
      this.#size = 0;
    }
  }
}

/** The condition as its SQL and parameters say it: two conditions with the same key decide alike. */
function conditionKey(condition: SqlFragment): string {
  return `${condition.sql}\u0000${JSON.stringify(condition.params, (_name, value: unknown) => (typeof value === 'bigint' ? `${value}n` : value))}`;
}
