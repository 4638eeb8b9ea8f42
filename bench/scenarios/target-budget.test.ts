import { aboveTheFloor, describeFloorBudget, floorBudget } from './target-budget.ts';

const floor = new Map([
  ['garbage collection', 900],
  ["Medplum's validation of each record", 650],
  ['store: SQLite statements and the durable commit', 600],
  ['store: JSON compression and decoding', 350],
  ['provider call (openai SDK, undici)', 640],
  ['HTTP server (node:http, express, router)', 80],
  ['Node and V8, unattributed', 170],
  ['the relay itself (bench code)', 45],
]);

describe('floorBudget', () => {
  test('counts Medplum, the SDK, HTTP and Node as not fhirgate\'s, and every store: part as the store\'s own', () => {
    const budget = floorBudget(floor, 1700);
    expect(budget.notOurs).toBe(650 + 640 + 80 + 170 + 45);
    expect(budget.store).toBe(950);
    expect(budget.gc).toBe(900);
    expect(budget.room).toBe(1700 - 1585);
  });

  test('a target the code that is not ours already uses up is said to be out of reach, by how much', () => {
    const text = describeFloorBudget('Target 2', floor, floorBudget(floor, 1500), 'a turn');
    expect(text).toContain('leaves 1500 µs a turn');
    expect(text).toContain("over the target by 85 µs a turn");
    expect(text).toContain("Medplum's validation 650 µs");
  });

  test('a target that leaves room says how many times the store and garbage collection exceed it', () => {
    const text = describeFloorBudget('Target 2', floor, floorBudget(floor, 1785), 'a turn');
    expect(text).toContain('leaves 200 µs a turn for the store');
    expect(text).toContain('9.3 times the room');
  });
});

describe('aboveTheFloor', () => {
  test('lists the parts that cost more, largest first, garbage collection apart', () => {
    const fhirgate = new Map([
      ...floor,
      ['garbage collection', 1200],
      ['provider call (openai SDK, undici)', 900],
      ['store: SQLite statements and the durable commit', 800],
      ["fhirgate's chat pipeline (parse, steps, records, answer)", 280],
      ['telemetry and logs', 90],
    ]);
    expect(aboveTheFloor(fhirgate, floor)).toEqual([
      { part: "fhirgate's chat pipeline (parse, steps, records, answer)", extra: 280 },
      { part: 'provider call (openai SDK, undici)', extra: 260 },
      { part: 'store: SQLite statements and the durable commit', extra: 200 },
      { part: 'telemetry and logs', extra: 90 },
    ]);
  });
});
