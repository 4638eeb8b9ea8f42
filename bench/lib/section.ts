/**
 * The result of one benchmark scenario, as each scenario script writes it (JSON, `--out <file>`) and the report
 * (`npm run bench`) renders it: a table of medians, the targets with whether they were met, and notes.
 */

/** A target of the issue, measured. */
export interface TargetResult {
  /** What is compared, e.g. "added latency p50: fhirgate ≤ 0.5 × Portkey". */
  readonly description: string;
  /** The measured value, formatted with its unit, e.g. "0.41 ms (ratio 0.32)". */
  readonly measured: string;
  /** The target, formatted, e.g. "≤ 0.5 ×". */
  readonly target: string;
  readonly met: boolean;
  /**
   * The SDK relay held to the same goal: a call through the official SDK with nothing checked or stored, the least
   * a gateway bound to the SDK (as fhirgate is) can cost. A goal it misses too is below that floor on this machine.
   */
  readonly floor?: { readonly measured: string; readonly met: boolean };
}

/** One bar of a chart: a label, a value and its unit. */
export interface ChartBar {
  readonly label: string;
  readonly value: number;
  readonly unit: string;
}

/** One scenario's section of the report. */
export interface ScenarioSection {
  /** e.g. "6. Devices". */
  readonly title: string;
  /** How it was measured: requests, repetitions, concurrency, pinning. */
  readonly method: string;
  readonly table: { readonly columns: readonly string[]; readonly rows: readonly (readonly (string | number)[])[] };
  readonly targets: readonly TargetResult[];
  /** Optional bars for the report's chart, e.g. requests/s per contender. */
  readonly chart?: { readonly title: string; readonly bars: readonly ChartBar[] };
  readonly notes: readonly string[];
}
