/**
 * The usage report (`GET /v1/usage`, docs/governance.md "Usage report") as the review console shows it: the rows the
 * server sums from the replies the signed-in user may read, folded into a chart's series per day and model, and
 * tables per user and per model. Pure functions, tested beside this file.
 */

/** The sums of one group, as the server answers them. */
export interface UsageTotals {
  readonly replies: number;
  readonly replies_without_usage: number;
  readonly replies_estimated: number;
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
  readonly estimated_tokens: number;
  readonly cost_usd: number;
}

/** One row of a report grouped by user, model and day. */
export interface UsageRow extends UsageTotals {
  readonly user: string;
  readonly model: string;
  readonly day: string;
}

/** The report, as `GET /v1/usage` answers it. */
export interface UsageReport {
  readonly start: string;
  readonly end: string;
  /** `project`: every reply (a project administrator); `readable`: those the user's AccessPolicy reads. */
  readonly scope: 'project' | 'readable';
  readonly data: readonly UsageRow[];
  readonly total: UsageTotals;
}

/** One point of the chart: a day, and the tokens of each model that day. */
export type UsageByDay = { readonly day: string } & Readonly<Record<string, number | string>>;

/** The chart's data: the tokens per day (every day of the period, none missing) and model, and the models. */
export function tokensByDay(report: Pick<UsageReport, 'start' | 'end' | 'data'>): { readonly days: UsageByDay[]; readonly models: string[] } {
  const models = [...new Set(report.data.map((row) => row.model))].sort();
  const days: UsageByDay[] = daysOf(report.start, report.end).map((day) => {
    const point: Record<string, number | string> = { day };
    for (const model of models) {
      point[model] = 0;
    }
    for (const row of report.data) {
      if (row.day === day) {
        point[row.model] = (point[row.model] as number) + row.total_tokens;
      }
    }
    return point as UsageByDay;
  });
  return { days, models };
}

/** The sums per value of one dimension: per `user` or `model` largest first, per `day` newest first. */
export function totalsBy(data: readonly UsageRow[], dimension: 'user' | 'model' | 'day'): { readonly key: string; readonly totals: UsageTotals }[] {
  const groups = new Map<string, UsageTotals>();
  for (const row of data) {
    groups.set(row[dimension], add(groups.get(row[dimension]), row));
  }
  const sums = [...groups.entries()].map(([key, totals]) => ({ key, totals }));
  return dimension === 'day'
    ? sums.sort((left, right) => right.key.localeCompare(left.key))
    : sums.sort((left, right) => right.totals.total_tokens - left.totals.total_tokens || left.key.localeCompare(right.key));
}

/** One user's tokens and cost today and in the report's month so far. */
export function spendOf(data: readonly UsageRow[], user: string, today: string): { readonly day: { tokens: number; cost: number }; readonly month: { tokens: number; cost: number } } {
  const sum = (rows: readonly UsageRow[]): { tokens: number; cost: number } => ({
    tokens: rows.reduce((total, row) => total + row.total_tokens, 0),
    cost: roundDollars(rows.reduce((total, row) => total + row.cost_usd, 0)),
  });
  const own = data.filter((row) => row.user === user);
  return { day: sum(own.filter((row) => row.day === today)), month: sum(own.filter((row) => row.day.slice(0, 7) === today.slice(0, 7))) };
}

function add(totals: UsageTotals | undefined, row: UsageTotals): UsageTotals {
  const base = totals ?? { replies: 0, replies_without_usage: 0, replies_estimated: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, estimated_tokens: 0, cost_usd: 0 };
  return {
    replies: base.replies + row.replies,
    replies_without_usage: base.replies_without_usage + row.replies_without_usage,
    replies_estimated: base.replies_estimated + row.replies_estimated,
    prompt_tokens: base.prompt_tokens + row.prompt_tokens,
    completion_tokens: base.completion_tokens + row.completion_tokens,
    total_tokens: base.total_tokens + row.total_tokens,
    estimated_tokens: base.estimated_tokens + row.estimated_tokens,
    cost_usd: roundDollars(base.cost_usd + row.cost_usd),
  };
}

/** Dollars to the billionth the server counts in, without floating-point dust. */
function roundDollars(amount: number): number {
  return Math.round(amount * 1e9) / 1e9;
}

/** Every day from `start` to `end` (`YYYY-MM-DD`, UTC), both included. */
export function daysOf(start: string, end: string): string[] {
  const days: string[] = [];
  for (let day = new Date(`${start}T00:00:00Z`); day.toISOString().slice(0, 10) <= end; day.setUTCDate(day.getUTCDate() + 1)) {
    days.push(day.toISOString().slice(0, 10));
  }
  return days;
}

/** Tokens as people read them: 12,345. */
export function formatTokens(tokens: number): string {
  return tokens.toLocaleString('en-US');
}

/** US dollars: $0.0123 for small amounts, $12.34 otherwise. */
export function formatDollars(amount: number): string {
  return `$${amount >= 1 ? amount.toFixed(2) : amount.toPrecision(amount === 0 ? 1 : 3)}`;
}
