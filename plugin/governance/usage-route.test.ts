import { parseUsageQuery } from './usage-route.ts';

const NOW = new Date('2026-05-12T10:00:00Z');

describe('the usage report query', () => {
  test('defaults: this month so far, by user, model and day', () => {
    expect(parseUsageQuery({}, 'urn:c', NOW)).toEqual({ start: '2026-05-01', end: '2026-05-12', groupBy: ['user', 'model', 'day'], categorySystem: 'urn:c' });
    expect(parseUsageQuery({ start: '2026-01-01', end: '2026-01-31', group_by: 'model' }, 'urn:c', NOW)).toMatchObject({ start: '2026-01-01', end: '2026-01-31', groupBy: ['model'] });
    expect(parseUsageQuery({ group_by: '' }, 'urn:c', NOW).groupBy).toEqual([]);
  });

  test('anything else is a 400 naming the parameter', () => {
    const refusal = (query: Record<string, unknown>): unknown => {
      try {
        parseUsageQuery(query as never, 'urn:c', NOW);
      } catch (error) {
        return error;
      }
      return undefined;
    };
    expect(refusal({ start: '2026-02-30' })).toMatchObject({ code: 'invalid_request', details: { param: 'start' } });
    expect(refusal({ start: '12/05/2026' })).toMatchObject({ details: { param: 'start' } });
    expect(refusal({ start: '2026-05-02', end: '2026-05-01' })).toMatchObject({ message: 'end must not be before start.' });
    expect(refusal({ start: '2025-01-01', end: '2026-05-01' })).toMatchObject({ message: expect.stringContaining('at most 366 days') });
    expect(refusal({ group_by: 'user,team' })).toMatchObject({ details: { param: 'group_by' }, message: expect.stringContaining("'team'") });
    expect(refusal({ user: 'Practitioner/1' })).toMatchObject({ details: { param: 'user' } });
    expect(refusal({ start: ['2026-01-01', '2026-01-02'] })).toMatchObject({ message: 'start must be given once.' });
  });
});
