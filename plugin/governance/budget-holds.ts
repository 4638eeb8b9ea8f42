/**
 * The budget held for turns still running (budgets.ts reserves a turn's likely spend when it is admitted and gives
 * it back when its reply is recorded): this instance's own holdings, exact and in memory, and their copy in the
 * Redis instances share, so that the others count them too.
 *
 * In Redis each instance has one hash per project (`<prefix>budget:{<project>}:held:<instance>`: `tokens`, `cost`,
 * `tokens:<profile>`, `cost:<profile>`), replaced whole whenever its holdings in the project change (at the end of
 * the event loop's turn, with the other changes of the project) and renewed every third of `ttlMs` while it holds
 * anything. The project's holders (`...:holders`, a sorted set scored by when each instance's holdings expire) tell
 * a reader whose hashes to add up. An instance that dies stops renewing: its holdings expire with their hash, and
 * readers drop it from the set, within `ttlMs` (15 s, the turn registry's bound on a lost instance, turn-registry.ts).
 * Replacing the hash whole makes every write idempotent: after Redis was away, the next write is the whole truth.
 */
import { randomUUID } from 'node:crypto';
import type { HostRedis } from '../host.ts';
import type { RedisGuard } from '../devices/redis-guard.ts';
import { addTo, type Totals } from './budget-counter-cells.ts';
import { HOLD_SCRIPT, runScript } from './budget-redis.ts';

/** An instance's holdings in Redis expire this long after they were last written, by default. */
export const DEFAULT_HOLD_TTL_MS = 15_000;
/** The holders set outlives its last writer's holdings by this much (it is only an index). */
const HOLDERS_KEPT_MS = 24 * 3600 * 1000;

/** One project's holdings on this instance. */
interface ProjectHoldings {
  readonly project: Totals;
  readonly users: Map<string, Totals>;
}

/** How the holdings are shared. */
export interface BudgetHoldsOptions {
  readonly redis?: HostRedis;
  readonly guard?: RedisGuard;
  readonly keyPrefix: string;
  readonly deadlineMs: number;
  readonly ttlMs?: number;
  readonly now: () => number;
}

/** This instance's holdings, and their copy in Redis. */
export class BudgetHolds {
  /** Names this instance's holdings in Redis. */
  readonly instanceId = randomUUID();
  readonly #options: BudgetHoldsOptions;
  readonly #ttlMs: number;
  readonly #projects = new Map<string, ProjectHoldings>();
  /** Projects whose holdings changed since they were last written to Redis. */
  readonly #changed = new Set<string>();
  /** Projects whose hash in Redis may hold something: written empty once their holdings are. */
  readonly #written = new Set<string>();
  #scheduled = false;
  #renewal: NodeJS.Timeout | undefined;

  constructor(options: BudgetHoldsOptions) {
    this.#options = options;
    this.#ttlMs = options.ttlMs ?? DEFAULT_HOLD_TTL_MS;
    if (options.redis) {
      this.#renewal = setInterval(() => this.#renew(), Math.max(1, Math.floor(this.#ttlMs / 3)));
      this.#renewal.unref();
    }
  }

  /** The prefix of an instance's holdings hash in `projectId` (READ_SCRIPT adds the instance's id). */
  holdingsPrefix(projectId: string): string {
    return `${this.#options.keyPrefix}budget:{${projectId}}:held:`;
  }

  /** The sorted set of the instances holding budget in `projectId`. */
  holdersKey(projectId: string): string {
    return `${this.#options.keyPrefix}budget:{${projectId}}:holders`;
  }

  /** Holds `amount` for one of `user`'s turns; returns what gives it back (once, however often it is called). */
  hold(projectId: string, user: string, amount: Totals): () => void {
    let holdings = this.#projects.get(projectId);
    if (holdings === undefined) {
      holdings = { project: { tokens: 0, cost: 0 }, users: new Map() };
      this.#projects.set(projectId, holdings);
    }
    const own = holdings;
    let userHolding = own.users.get(user);
    if (userHolding === undefined) {
      userHolding = { tokens: 0, cost: 0 };
      own.users.set(user, userHolding);
    }
    const held = userHolding;
    addTo(own.project, amount, 1);
    addTo(held, amount, 1);
    this.#changedIn(projectId);
    let given = false;
    return () => {
      if (given) {
        return;
      }
      given = true;
      addTo(own.project, amount, -1);
      addTo(held, amount, -1);
      if (held.tokens === 0 && held.cost === 0) {
        own.users.delete(user);
      }
      if (own.users.size === 0) {
        this.#projects.delete(projectId);
      }
      this.#changedIn(projectId);
    };
  }

  /** What this instance holds in `projectId`: in all, and for `user`. */
  of(projectId: string, user: string): { readonly project: Totals; readonly user: Totals } {
    const holdings = this.#projects.get(projectId);
    return { project: holdings?.project ?? { tokens: 0, cost: 0 }, user: holdings?.users.get(user) ?? { tokens: 0, cost: 0 } };
  }

  /** Stops renewing; the holdings in Redis expire on their own. */
  close(): void {
    clearInterval(this.#renewal);
  }

  #changedIn(projectId: string): void {
    if (!this.#options.redis) {
      return;
    }
    this.#changed.add(projectId);
    this.#schedule();
  }

  #schedule(): void {
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.#writeChanged());
    }
  }

  /** Renews the holdings of every project this instance holds budget in (and clears those it no longer does). */
  #renew(): void {
    for (const projectId of [...this.#projects.keys(), ...this.#written]) {
      this.#changed.add(projectId);
    }
    this.#writeChanged();
  }

  #writeChanged(): void {
    this.#scheduled = false;
    const redis = this.#options.redis;
    const epoch = this.#options.guard?.shouldAsk();
    if (!redis || epoch === undefined) {
      // Redis does not answer: the holdings count here only, and stay to be written whole once it does.
      return;
    }
    const projects = [...this.#changed];
    this.#changed.clear();
    for (const projectId of projects) {
      this.#write(redis, epoch, projectId);
    }
  }

  #write(redis: HostRedis, epoch: number, projectId: string): void {
    const holdings = this.#projects.get(projectId);
    if (holdings === undefined && !this.#written.has(projectId)) {
      return;
    }
    const fields: (string | number)[] = [];
    if (holdings) {
      fields.push('tokens', holdings.project.tokens, 'cost', holdings.project.cost);
      for (const [user, held] of holdings.users) {
        fields.push(`tokens:${user}`, held.tokens, `cost:${user}`, held.cost);
      }
      this.#written.add(projectId);
    }
    const keys = [`${this.holdingsPrefix(projectId)}${this.instanceId}`, this.holdersKey(projectId)];
    const args = [this.instanceId, this.#options.now() + this.#ttlMs, HOLDERS_KEPT_MS, ...fields];
    runScript(redis, this.#options.deadlineMs, HOLD_SCRIPT, keys, args).then(
      () => {
        if (!this.#projects.has(projectId)) {
          this.#written.delete(projectId);
        }
      },
      (error: unknown) => {
        this.#options.guard?.failed(epoch, error);
        this.#changed.add(projectId);
      },
    );
  }
}
