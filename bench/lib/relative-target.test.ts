import { figuresOf, floorTarget, relativeTarget } from './relative-target.ts';

const requestsPerSecond = (value: number): string => `${value.toFixed(0)}/s`;
const rows = [
  { name: 'SDK relay', requestsPerSecond: 2000 },
  { name: 'SDK relay + store', requestsPerSecond: 300 },
  { name: 'fhirgate', requestsPerSecond: 280 },
];
const figures = figuresOf(rows, (row) => row.requestsPerSecond);

describe('targets stated against the same run', () => {
  test('a goal at the relay is decided from the relay, and the floor is held to the same goal', () => {
    const target = relativeTarget({ description: 'throughput', direction: 'at-least', goal: (relay) => 0.1 * relay, format: requestsPerSecond }, figures);
    expect(target).toMatchObject({ measured: '280/s', reference: '2000/s', target: '≥ 200/s', met: true, floor: { measured: '300/s', met: true } });
  });

  test('a goal at the floor is decided from the floor, which the report shows as its reference', () => {
    const atFloor = floorTarget({ description: 'at its floor', direction: 'at-least', goal: (floor) => 0.9 * floor, format: requestsPerSecond }, figures);
    expect(atFloor).toEqual({ description: 'at its floor', measured: '280/s', reference: '300/s (the floor)', target: '≥ 270/s', met: true });
    const missed = floorTarget({ description: 'at its floor', direction: 'at-least', goal: (floor) => 0.95 * floor, format: requestsPerSecond }, figures);
    expect(missed).toMatchObject({ target: '≥ 285/s', met: false });
    const lower = floorTarget({ description: 'latency', direction: 'at-most', goal: (floor) => floor + 10, format: requestsPerSecond }, figures);
    expect(lower).toMatchObject({ target: '≤ 310/s', met: true });
  });

  test('without the floor in the run there is no goal at it', () => {
    const withoutFloor = figuresOf(rows.filter((row) => row.name !== 'SDK relay + store'), (row) => row.requestsPerSecond);
    expect(floorTarget({ description: 'x', direction: 'at-least', goal: (floor) => floor, format: requestsPerSecond }, withoutFloor)).toBeUndefined();
  });
});
