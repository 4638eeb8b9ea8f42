import { median, ratiosByRound } from './statistics.ts';

test('ratios by round compare each round with itself, so a drift between rounds does not move them', () => {
  // The machine is twice as slow in the second round, for both.
  const floor = [4000, 8000, 4400];
  const fhirgate = [4400, 8800, 4840];
  expect(ratiosByRound(fhirgate, floor).map((ratio) => ratio.toFixed(2))).toEqual(['1.10', '1.10', '1.10']);
  // The ratio of the medians mixes rounds: here 8000 against 4400.
  expect((median(fhirgate) / median(floor)).toFixed(2)).toBe('1.10');
  expect((median([4400, 8800, 4000]) / median(floor)).toFixed(2)).toBe('1.00');
  expect(median(ratiosByRound([4400, 8800, 4000], floor))).toBeCloseTo(1.1, 5);
});

test('a round measured in only one of the two, or at no cost, is left out', () => {
  expect(ratiosByRound([10, 20, 30], [5, 10])).toEqual([2, 2]);
  expect(ratiosByRound([10, 20], [0, 10])).toEqual([2]);
});
