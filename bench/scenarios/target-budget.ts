/**
 * What a CPU target leaves a turn, set against the floor's parts (scenario 14): how much of the floor is code that
 * is not fhirgate's (Medplum's validation of each record, the provider's SDK, Node's HTTP server and the rest of
 * Node), and how much the target then leaves for the store's own parts and garbage collection. A target that the
 * floor's code that is not ours already uses up cannot be met by any store that writes through Medplum's validation;
 * one that leaves room says how much of the store's own work would have to go.
 */
import { formatNumber } from '../lib/statistics.ts';

/** Parts of a turn that are not fhirgate's code, whatever gateway runs them, with the name a sentence gives each. */
const NOT_FHIRGATES: ReadonlyMap<string, string> = new Map([
  ["Medplum's validation of each record", "Medplum's validation"],
  ['provider call (openai SDK, undici)', 'the provider call through the SDK'],
  ['HTTP server (node:http, express, router)', 'the HTTP server'],
  ['Medplum (other)', 'Medplum (other)'],
  ['the relay itself (bench code)', "the relay's own code"],
  ['Node and V8, unattributed', 'Node and V8'],
]);

const GC = 'garbage collection';

export interface FloorBudget {
  /** What the target leaves, µs of CPU a turn (or a chunk). */
  readonly budget: number;
  /** The floor's parts that are not fhirgate's code. */
  readonly notOurs: number;
  /** The store's own parts (every `store:` part). */
  readonly store: number;
  readonly gc: number;
  /** What the budget leaves for the store's own parts and garbage collection (negative: nothing, by that much). */
  readonly room: number;
}

/** The floor's CPU, by part, against what a target leaves (the same unit for both). */
export function floorBudget(perUnit: ReadonlyMap<string, number>, budget: number): FloorBudget {
  const sum = (parts: readonly string[]) => parts.reduce((total, part) => total + (perUnit.get(part) ?? 0), 0);
  const notOurs = sum([...NOT_FHIRGATES.keys()]);
  const store = sum([...perUnit.keys()].filter((part) => part.startsWith('store:')));
  return { budget, notOurs, store, gc: perUnit.get(GC) ?? 0, room: budget - notOurs };
}

/** The sentence a report gives a floor budget: `what` names the target, `unit` the figures' ('a turn', 'a chunk'). */
export function describeFloorBudget(what: string, perUnit: ReadonlyMap<string, number>, budget: FloorBudget, unit: string, decimals = 0): string {
  const figure = (value: number) => `${formatNumber(value, decimals)} µs`;
  const named = [...NOT_FHIRGATES]
    .filter(([part]) => (perUnit.get(part) ?? 0) >= 0.5 * 10 ** -decimals)
    .map(([part, name]) => `${name} ${figure(perUnit.get(part) ?? 0)}`)
    .join(', ');
  const verdict =
    budget.room <= 0
      ? `so the code that is not fhirgate's alone is over the target by ${figure(-budget.room)} ${unit}, before the store's own parts (${figure(budget.store)}) and garbage collection (${figure(budget.gc)}): out of reach for a store that writes through Medplum's validation and sends the history through the SDK`
      : `which leaves ${figure(budget.room)} ${unit} for the store's own parts and garbage collection, where the floor spends ${figure(budget.store)} and ${figure(budget.gc)}: ` +
        `${formatNumber((budget.store + budget.gc) / budget.room, 1)} times the room`;
  return `${what} leaves ${figure(budget.budget)} ${unit}. Of the floor's, ${figure(budget.notOurs)} is code that is not fhirgate's (${named}), ${verdict}.`;
}

/** The parts where one run spends more than another (fhirgate than the floor, a turn with the chart than one without), largest first; garbage collection apart. */
export function aboveTheFloor(fhirgate: ReadonlyMap<string, number>, floor: ReadonlyMap<string, number>): { readonly part: string; readonly extra: number }[] {
  return [...fhirgate.keys()]
    .filter((part) => part !== GC)
    .map((part) => ({ part, extra: (fhirgate.get(part) ?? 0) - (floor.get(part) ?? 0) }))
    .filter((entry) => entry.extra > 0)
    .sort((a, b) => b.extra - a.extra);
}

