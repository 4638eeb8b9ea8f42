import { daysOf, formatDollars, spendOf, tokensByDay, totalsBy, type UsageRow } from './usage-report.ts';

function row(user: string, model: string, day: string, total: number, cost = 0): UsageRow {
  return { user, model, day, replies: 1, replies_without_usage: 0, replies_estimated: 0, prompt_tokens: total, completion_tokens: 0, total_tokens: total, estimated_tokens: 0, cost_usd: cost };
}

const DATA = [row('Practitioner/a', 'm1', '2026-05-01', 10, 0.1), row('Practitioner/a', 'm2', '2026-05-03', 5, 0.2), row('Practitioner/b', 'm1', '2026-05-03', 100, 0.000000001)];

describe('the usage report in the review console', () => {
  test('the chart has every day of the period, with each model’s tokens that day', () => {
    const { days, models } = tokensByDay({ start: '2026-05-01', end: '2026-05-03', data: DATA });
    expect(models).toEqual(['m1', 'm2']);
    expect(days).toEqual([
      { day: '2026-05-01', m1: 10, m2: 0 },
      { day: '2026-05-02', m1: 0, m2: 0 },
      { day: '2026-05-03', m1: 100, m2: 5 },
    ]);
  });

  test('totals per user and per model (largest first) and per day (newest first) add up to the rows', () => {
    expect(totalsBy(DATA, 'user').map((group) => [group.key, group.totals.total_tokens, group.totals.replies])).toEqual([
      ['Practitioner/b', 100, 1],
      ['Practitioner/a', 15, 2],
    ]);
    expect(totalsBy(DATA, 'model').find((group) => group.key === 'm1')?.totals.cost_usd).toBe(0.100000001);
    expect(totalsBy(DATA, 'day').map((group) => [group.key, group.totals.total_tokens])).toEqual([
      ['2026-05-03', 105],
      ['2026-05-01', 10],
    ]);
  });

  test("a user's spend today and this month", () => {
    expect(spendOf(DATA, 'Practitioner/a', '2026-05-03')).toEqual({ day: { tokens: 5, cost: 0.2 }, month: { tokens: 15, cost: 0.3 } });
  });

  test('days across a month end, and dollars', () => {
    expect(daysOf('2026-01-30', '2026-02-01')).toEqual(['2026-01-30', '2026-01-31', '2026-02-01']);
    expect(formatDollars(12.345)).toBe('$12.35');
    expect(formatDollars(0.000123)).toBe('$0.000123');
    expect(formatDollars(0)).toBe('$0');
  });
});
