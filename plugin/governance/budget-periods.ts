/**
 * The periods budgets count in: the UTC day and the UTC month. A turn's spend counts in the day and the month of
 * the moment its reply is recorded (the reply's `sent`), which is also the day the usage report puts it in.
 */
import type { BudgetPeriod } from './project-governance-settings.ts';

/** One period: its key (`2026-01-23`, `2026-01`) and when it ends (the next one starts), in epoch milliseconds. */
export interface PeriodWindow {
  readonly key: string;
  readonly endsAt: number;
}

/** The day and the month a moment falls in. */
export interface BudgetPeriods {
  readonly day: PeriodWindow;
  readonly month: PeriodWindow;
}

/** The periods of `at` (epoch milliseconds). */
export function periodsAt(at: number): BudgetPeriods {
  const date = new Date(at);
  const year = date.getUTCFullYear();
  const month = date.getUTCMonth();
  const day = date.getUTCDate();
  const monthKey = `${year}-${String(month + 1).padStart(2, '0')}`;
  return {
    day: { key: `${monthKey}-${String(day).padStart(2, '0')}`, endsAt: Date.UTC(year, month, day + 1) },
    month: { key: monthKey, endsAt: Date.UTC(year, month + 1, 1) },
  };
}

/**
 * The periods of now, worked out again only when the day has turned: the check runs on every turn, and this makes
 * its clock a comparison.
 */
export class CurrentPeriods {
  #periods: BudgetPeriods;
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
    this.#periods = periodsAt(now());
  }

  /** The periods now, and now itself. */
  at(): { readonly periods: BudgetPeriods; readonly now: number } {
    const now = this.#now();
    if (now >= this.#periods.day.endsAt) {
      this.#periods = periodsAt(now);
    }
    return { periods: this.#periods, now };
  }

  /** The periods of `at`: today's without working them out again when it is today, else its own. */
  of(at: number): BudgetPeriods {
    const today = this.at().periods;
    return at < today.day.endsAt && at >= today.day.endsAt - DAY_MS ? today : periodsAt(at);
  }
}

const DAY_MS = 24 * 3600 * 1000;

/** The window of one period. */
export function windowOf(periods: BudgetPeriods, period: BudgetPeriod): PeriodWindow {
  return period === 'day' ? periods.day : periods.month;
}
