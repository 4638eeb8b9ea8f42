/**
 * Token and cost budgets per project and per user, per UTC day and month (project-governance-settings.ts): checked
 * before anything of a turn is stored or sent, held for the turn while it runs, settled from the usage its reply
 * records.
 *
 * - The check compares this instance's view of the shared counters (budget-counters.ts) with each budget: a budget
 *   whose spend, with the budget held for turns still running, has reached its limit refuses the turn with 429, a
 *   code naming the budget (`budget_exceeded_<project|user>_<day|month>`), and `Retry-After` until its period ends.
 * - An admitted turn then holds what it may cost (`reserve`): its prompt's estimated tokens and its `max_tokens`
 *   (the plugin's `llm.maxTokens` when the request gives none), and their cost at the model's price, so that turns
 *   admitted while it runs see it. A turn that starts under budget runs to its end, however far its reply goes past
 *   it, and is counted in full.
 * - Settling gives the held amount back and adds the reply's tokens (prompt and completion) and its cost (the
 *   model's price, when it has one) to the day and the month the reply is recorded in: the provider's usage, or
 *   fhirgate's estimate for a reply that did not complete (usage-estimate.ts); the same figures are written on the
 *   reply (chat-turn.ts). A turn that ends without a reply gives its holding back (`release`); either happens once.
 * Every turn is counted, in projects with budgets or not, so a budget set in the middle of a period sees that
 * period's spend so far (without Redis, the spend recorded before it: budget-seed.ts).
 */
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import type { CallerContext } from '../host.ts';
import type { ChatUsage } from '../llm/chat-model.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import { CurrentPeriods, windowOf, type BudgetPeriods } from './budget-periods.ts';
import { spentOf, type BudgetCounters, type Spend } from './budget-counters.ts';
import { costOf, NANO_PER_DOLLAR, type ModelPrice } from './model-prices.ts';
import type { Budget, ProjectGovernance } from './project-governance-settings.ts';
import { recordedUsageOf } from './usage-report.ts';

/** What a turn may cost, as it is admitted: what it holds of the budgets while it runs. */
export interface TurnReservation {
  /** The model the turn is sent to (its price). */
  readonly modelId: string;
  /** The prompt's tokens, estimated (usage-estimate.ts). */
  readonly promptTokens: number;
  /** The most the reply may take: the request's `max_tokens`, or the plugin's default. */
  readonly maxTokens: number;
}

/** The budgets' side of one turn, from its admission to its reply's record. */
export interface TurnBudget {
  /**
   * Holds what the turn may cost against the budgets, refusing it (429, as the check does) when the spend and what
   * the turns still running hold already reach one: the check's second look, made where nothing can come between it
   * and the holding, just before the turn's prompt is stored. Does nothing more once the turn holds its reservation.
   */
  reserve(): void;
  /**
   * Gives the reservation back and counts a recorded reply's usage against the budgets of the period `recordedAt`
   * falls in; returns its cost in nano-dollars (undefined when the reply records no usage or the model has no price).
   */
  settle(modelId: string, usage: ChatUsage | undefined, recordedAt: Date): number | undefined;
  /** Gives the reservation back (a turn that ends without a reply); does nothing once it was given back. */
  release(): void;
  /** The model's price for this project (its own over the operator's), for what a reply is charged. */
  priceOf(modelId: string): ModelPrice | undefined;
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
   * in it, is used up, counting what the turns still running hold; otherwise returns what reserves the turn's likely
   * cost and settles it.
   */
  async check(caller: CallerContext, governance: ProjectGovernance, reservation: TurnReservation): Promise<TurnBudget> {
    const projectId = caller.project.id;
    const user = caller.profile.reference ?? caller.membership.id;
    if (governance.budgets.length > 0) {
      const { periods, now } = this.#periods.at();
      const spend = await this.#counters.spend(projectId, user, periods);
      this.#observe(projectId, governance.budgets, spend, periods);
      this.#refuseIfUsedUp(projectId, governance.budgets, spend, periods, now);
    }
    const price = governance.prices.get(reservation.modelId);
    const held = {
      tokens: reservation.promptTokens + reservation.maxTokens,
      cost: costOf(price, { promptTokens: reservation.promptTokens, completionTokens: reservation.maxTokens }) ?? 0,
    };
    let giveBack: (() => void) | undefined;
    let reserved = false;
    const release = (): void => {
      giveBack?.();
      giveBack = undefined;
    };
    return {
      reserve: () => {
        if (reserved || governance.budgets.length === 0) {
          return;
        }
        const { periods, now } = this.#periods.at();
        this.#refuseIfUsedUp(projectId, governance.budgets, this.#counters.view(projectId, user, periods), periods, now);
        reserved = true;
        giveBack = this.#counters.hold(projectId, user, held);
      },
      settle: (modelId, usage, recordedAt) => {
        release();
        if (usage === undefined) {
          return undefined;
        }
        const cost = costOf(governance.prices.get(modelId), usage);
        if (cost !== undefined) {
          this.#telemetry.cost.add(cost / NANO_PER_DOLLAR, { 'fhirgate.project.id': projectId, 'fhirgate.model': modelId });
        }
        this.#counters.add(projectId, user, this.#periods.of(recordedAt.getTime()), usage.promptTokens + usage.completionTokens, cost ?? 0, recordedAt.getTime());
        return cost;
      },
      release,
      priceOf: (modelId) => governance.prices.get(modelId),
    };
  }

  /**
   * Counts a reply a recovery recorded (its turn's process stopped before it could): its recorded usage, in the
   * period of its `sent`, for its recipient. `counted`: that process had counted it already (see
   * `BudgetCounters.addRecovered`).
   */
  recovered(projectId: string, reply: Communication & { readonly id: string }, counted: boolean): void {
    const usage = recordedUsageOf(reply);
    const recipient = reply.recipient?.[0];
    const user = recipient?.reference ?? recipient?.identifier?.value;
    const sent = reply.sent ? Date.parse(reply.sent) : Number.NaN;
    if (usage === undefined || user === undefined || Number.isNaN(sent)) {
      return;
    }
    this.#counters.addRecovered(projectId, user, this.#periods.of(sent), { tokens: usage.prompt + usage.completion, cost: usage.cost, replyId: reply.id, sent, counted });
  }

  /** Throws the refusal of the budget used up, counting what turns still running hold; counts it in the metrics. */
  #refuseIfUsedUp(projectId: string, budgets: readonly Budget[], spend: Spend, periods: BudgetPeriods, now: number): void {
    const refusal = usedUp(budgets, spend, periods);
    if (refusal) {
      this.#telemetry.governanceRefusals.add(1, { 'fhirgate.governance.rule': 'budget', 'fhirgate.budget': budgetName(refusal.budget), 'fhirgate.project.id': projectId });
      throw budgetExceeded(refusal, windowOf(periods, refusal.budget.period).endsAt, now);
    }
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

/** A budget that refuses a turn: used up, or only taken up by what the turns still running hold. */
interface Refusal {
  readonly budget: Budget;
  readonly heldUp: boolean;
}

/**
 * The budget that refuses the turn. Of those whose spend has reached their limit, the one that resets last (retrying
 * earlier cannot pass); else, of those that the turns still running take up the rest of, the first.
 */
function usedUp(budgets: readonly Budget[], spend: Spend, periods: BudgetPeriods): Refusal | undefined {
  let refusing: Budget | undefined;
  let heldUp: Budget | undefined;
  for (const budget of budgets) {
    const spent = spentOf(spend[budget.period], budget.scope, budget.measure);
    if (spent >= budget.limit) {
      if (refusing === undefined || windowOf(periods, budget.period).endsAt > windowOf(periods, refusing.period).endsAt) {
        refusing = budget;
      }
    } else if (spent + spentOf(spend.held, budget.scope, budget.measure) >= budget.limit) {
      heldUp ??= budget;
    }
  }
  return refusing ? { budget: refusing, heldUp: false } : heldUp ? { budget: heldUp, heldUp: true } : undefined;
}

/** How long a turn refused for what the turns still running hold is told to wait: they give it back as they end. */
const HELD_UP_RETRY_AFTER_SECONDS = 5;

/**
 * 429 with the budget's code, what it is, and `Retry-After`: until its period ends, or, when the turns still running
 * hold the rest of it, a few seconds (they give back what they do not spend as they end).
 */
function budgetExceeded(refusal: Refusal, endsAt: number, now: number): AppError {
  const { budget } = refusal;
  const owner = budget.scope === 'project' ? "The project's" : 'Your';
  const period = budget.period === 'day' ? 'daily' : 'monthly';
  const limit = budget.measure === 'tokens' ? `${budget.limit.toLocaleString('en-US')} tokens` : `${(budget.limit / NANO_PER_DOLLAR).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 6 })} USD`;
  const resets = new Date(endsAt).toISOString().replace('.000Z', 'Z');
  const what = `${owner} ${period} ${budget.measure === 'tokens' ? 'token' : 'cost'} budget (${limit}, ${budget.setting})`;
  return new AppError(
    `budget_exceeded_${budget.scope}_${budget.period}`,
    refusal.heldUp ? `${what} is taken up by the turns still running; retry once they end.` : `${what} is used up; it resets at ${resets}.`,
    {
      retryAfterSeconds: refusal.heldUp ? HELD_UP_RETRY_AFTER_SECONDS : Math.max(1, Math.ceil((endsAt - now) / 1000)),
      isRetryable: false,
      details: { budget: budgetName(budget) },
    },
  );
}
