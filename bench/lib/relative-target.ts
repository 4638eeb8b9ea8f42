/**
 * Targets stated against the SDK relay of the same run (bench/README.md): the goal is computed from the relay's
 * figure, and the floor contender (the SDK relay plus the store's history page and two durable writes) is held to the
 * same goal.
 */
import type { TargetResult } from './section.ts';

/** The same-run figures a relative target compares. */
export interface RelativeFigures {
  readonly fhirgate: number;
  /** The SDK relay's figure; no target can be decided without it. */
  readonly relay: number;
  /** The SDK relay + store's figure, when it ran. */
  readonly floor?: number;
}

/** How a relative goal is made from the relay's figure, and how its values read. */
export interface RelativeGoal {
  readonly description: string;
  /** `at-most`: lower is better (latency, CPU, time); `at-least`: higher is better (requests/s). */
  readonly direction: 'at-most' | 'at-least';
  /** The goal for this run, from the relay's figure (e.g. relay + 1 ms, 0.33 × relay). */
  readonly goal: (relay: number) => number;
  /** A value with its unit, e.g. "1.23 ms". */
  readonly format: (value: number) => string;
}

/** The target, decided; undefined when fhirgate's or the relay's figure is missing (not a number). */
export function relativeTarget(goal: RelativeGoal, figures: RelativeFigures): TargetResult | undefined {
  if (!Number.isFinite(figures.fhirgate) || !Number.isFinite(figures.relay)) return undefined;
  const bound = goal.goal(figures.relay);
  const meets = (value: number): boolean => (goal.direction === 'at-most' ? value <= bound : value >= bound);
  const shortfall = (value: number): number => (goal.direction === 'at-most' ? value - bound : bound - value);
  const floor = figures.floor;
  return {
    description: goal.description,
    measured: goal.format(figures.fhirgate),
    reference: goal.format(figures.relay),
    target: `${goal.direction === 'at-most' ? '≤' : '≥'} ${goal.format(bound)}`,
    met: meets(figures.fhirgate),
    floor:
      floor === undefined || !Number.isFinite(floor)
        ? undefined
        : { measured: goal.format(floor), met: meets(floor), shortBy: meets(floor) ? undefined : goal.format(shortfall(floor)) },
  };
}

/**
 * A target stated against the floor of the same run (the SDK relay + store: issue 38's "fhirgate at its floor"): the
 * goal is computed from the floor's figure, which is shown as the reference. Undefined when fhirgate's or the floor's
 * figure is missing.
 */
export function floorTarget(goal: RelativeGoal, figures: RelativeFigures): TargetResult | undefined {
  const floor = figures.floor;
  if (floor === undefined || !Number.isFinite(figures.fhirgate) || !Number.isFinite(floor)) return undefined;
  const bound = goal.goal(floor);
  return {
    description: goal.description,
    measured: goal.format(figures.fhirgate),
    reference: `${goal.format(floor)} (the floor)`,
    target: `${goal.direction === 'at-most' ? '≤' : '≥'} ${goal.format(bound)}`,
    met: goal.direction === 'at-most' ? figures.fhirgate <= bound : figures.fhirgate >= bound,
  };
}

/** fhirgate's, the SDK relay's and the floor's figures from a scenario's summary rows (NaN where a row is missing). */
export function figuresOf<Row extends { readonly name: string }>(rows: readonly Row[], pick: (row: Row) => number): RelativeFigures {
  const figure = (name: string): number => {
    const row = rows.find((candidate) => candidate.name === name);
    return row ? pick(row) : Number.NaN;
  };
  return { fhirgate: figure('fhirgate'), relay: figure('SDK relay'), floor: figure('SDK relay + store') };
}
