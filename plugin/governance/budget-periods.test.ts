import { CurrentPeriods, periodsAt } from './budget-periods.ts';

describe('budget periods', () => {
  test('the UTC day and month of a moment, and when each ends', () => {
    const periods = periodsAt(Date.parse('2026-01-31T23:59:59.999Z'));
    expect(periods.day).toEqual({ key: '2026-01-31', endsAt: Date.parse('2026-02-01T00:00:00Z') });
    expect(periods.month).toEqual({ key: '2026-01', endsAt: Date.parse('2026-02-01T00:00:00Z') });
    expect(periodsAt(Date.parse('2026-12-15T08:00:00Z')).month).toEqual({ key: '2026-12', endsAt: Date.parse('2027-01-01T00:00:00Z') });
  });

  test('the current periods turn with the clock', () => {
    let now = Date.parse('2026-03-01T23:59:59Z');
    const current = new CurrentPeriods(() => now);
    expect(current.at().periods.day.key).toBe('2026-03-01');
    now += 1000;
    expect(current.at()).toMatchObject({ periods: { day: { key: '2026-03-02' }, month: { key: '2026-03' } }, now });
    expect(current.of(now + 3600_000)).toBe(current.at().periods);
    expect(current.of(Date.parse('2026-03-01T23:59:59.999Z')).day.key).toBe('2026-03-01');
  });
});
