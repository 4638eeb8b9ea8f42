/**
 * Token and cost budgets per project and per user, per UTC day and month (project-governance-settings.ts): checked
 * before anything of a turn is stored or sent, settled from the usage the provider reported once the reply is
 * recorded.
 *
 * - The check compares this instance's view of the shared counters (budget-counters.ts) with each budget: a budget
 *   whose spend has reached its limit refuses the turn with 429, a code naming the budget
 *   (`budget_exceeded_<project|user>_<day|month>`), and `Retry-After` until its period ends. A turn that starts
 *   under budget runs to its end, however far its reply goes past it, and is counted in full.
 * - Settling adds the reply's tokens (prompt and completion) and its cost (the model's price, when it has one) to
 *   the day and the month the reply is recorded in; the same cost is written on the reply (chat-turn.ts).
 * Every turn is counted, in projects with budgets or not, so a budget set in the middle of a period sees that
 * period's spend so far.
 */
import { AppError } from '../errors.ts';
import type { CallerContext } from '../host.ts';
import type { ChatUsage } from '../llm/chat-model.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import { CurrentPeriods, windowOf, type BudgetPeriods } from './budget-periods.ts';
import { spentOf, type BudgetCounters, type Spend } from './budget-counters.ts';
import { costOf, NANO_PER_DOLLAR } from './model-prices.ts';
import type { Budget, ProjectGovernance } from './project-governance-settings.ts';

/** The budgets' side of one turn: what settles it once its reply is recorded. */
export interface TurnBudget {
  /**
   * Counts a recorded reply's usage against the budgets of the period `recordedAt` falls in, and returns its cost
   * in nano-dollars (undefined when the provider reported no usage or the model has no price).
   */
  settle(modelId: string, usage: ChatUsage | undefined, recordedAt: Date): number | undefined;
}

/** The name a budget goes by in metrics and messages, e.g. `user_month_cost`. */
export function budgetName(budget: Pick<Budget, 'scope' | 'period' | 'measure'>): string {
  return `${budget.scope}_${budget.period}_${budget.measure}`;
}

/** A project budget's use, as last seen, for the usage gauge. */
interface ObservedUse {
  readonly ratio: number;
  readonly endsAt: number;
}

// Projects whose budget use the gauge reports, at most; the least recently checked go first.
const MAX_OBSERVED_PROJECTS = 1000;

/** Checks and settles the budgets of every project. */
export class Budgets {
  readonly #counters: BudgetCounters;
  readonly #telemetry: Telemetry;
  readonly #periods: CurrentPeriods;
  readonly #observed = new Map<string, Map<string, ObservedUse>>();

  constructor(counters: BudgetCounters, telemetry: Telemetry, now: () => number = Date.now) {
    this.#counters = counters;
    this.#telemetry = telemetry;
    this.#periods = new CurrentPeriods(now);
    telemetry.budgetUsage.addCallback((result) => {
      const current = now();
      for (const [projectId, uses] of this.#observed) {
        for (const [budget, use] of uses) {
          if (use.endsAt > current) {
            result.observe(use.ratio, { 'fhirgate.project.id': projectId, 'fhirgate.budget': budget });
          }
        }
      }
    });
  }

  /**
   * Refuses the turn (429, nothing stored, nothing sent) when a budget of the caller's project, or of the caller
   * in it, is used up; otherwise returns what settles the turn.
   */
  async check(caller: CallerContext, governance: ProjectGovernance): Promise<TurnBudget> {
    const projectId = caller.project.id;
    const user = caller.profile.reference ?? caller.membership.id;
    if (governance.budgets.length > 0) {
      const { periods, now } = this.#periods.at();
      const spend = await this.#counters.spend(projectId, user, periods);
      this.#observe(projectId, governance.budgets, spend, periods);
      const exceeded = usedUp(governance.budgets, spend, periods);
      if (exceeded) {
        this.#telemetry.governanceRefusals.add(1, { 'fhirgate.governance.rule': 'budget', 'fhirgate.budget': budgetName(exceeded), 'fhirgate.project.id': projectId });
        throw budgetExceeded(exceeded, windowOf(periods, exceeded.period).endsAt, now);
      }
    }
    return {
      settle: (modelId, usage, recordedAt) => {
        if (usage === undefined) {
          return undefined;
        }
        const cost = costOf(governance.prices.get(modelId), usage);
        this.#counters.add(projectId, user, this.#periods.of(recordedAt.getTime()), usage.promptTokens + usage.completionTokens, cost ?? 0);
        return cost;
      },
    };
  }

  /** Keeps the share of each project budget used, for the gauge. */
  #observe(projectId: string, budgets: readonly Budget[], spend: Spend, periods: BudgetPeriods): void {
    let uses = this.#observed.get(projectId);
    if (uses === undefined) {
      if (this.#observed.size >= MAX_OBSERVED_PROJECTS) {
        this.#observed.delete(this.#observed.keys().next().value as string);
      }
      uses = new Map();
      this.#observed.set(projectId, uses);
    }
    for (const budget of budgets) {
      if (budget.scope === 'project') {
        const used = spentOf(spend[budget.period], 'project', budget.measure);
        uses.set(budgetName(budget), { ratio: budget.limit > 0 ? used / budget.limit : 1, endsAt: windowOf(periods, budget.period).endsAt });
      }
    }
  }
}

/** The budget that refuses the turn: of those used up, the one that resets last (retrying earlier cannot pass). */
function usedUp(budgets: readonly Budget[], spend: Spend, periods: BudgetPeriods): Budget | undefined {
  let refusing: Budget | undefined;
  for (const budget of budgets) {
    if (spentOf(spend[budget.period], budget.scope, budget.measure) >= budget.limit) {
      if (refusing === undefined || windowOf(periods, budget.period).endsAt > windowOf(periods, refusing.period).endsAt) {
        refusing = budget;
      }
    }
  }
  return refusing;
}

/** 429 with the budget's code, what it is, and `Retry-After` until its period ends. */
function budgetExceeded(budget: Budget, endsAt: number, now: number): AppError {
  const owner = budget.scope === 'project' ? "The project's" : 'Your';
  const period = budget.period === 'day' ? 'daily' : 'monthly';
  const limit = budget.measure === 'tokens' ? `${budget.limit.toLocaleString('en-US')} tokens` : `${(budget.limit / NANO_PER_DOLLAR).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 6 })} USD`;
  const resets = new Date(endsAt).toISOString().replace('.000Z', 'Z');
  return new AppError(
    `budget_exceeded_${budget.scope}_${budget.period}`,
    `${owner} ${period} ${budget.measure === 'tokens' ? 'token' : 'cost'} budget (${limit}, ${budget.setting}) is used up; it resets at ${resets}.`,
    { retryAfterSeconds: Math.max(1, Math.ceil((endsAt - now) / 1000)), isRetryable: false, details: { budget: budgetName(budget) } },
  );
}
