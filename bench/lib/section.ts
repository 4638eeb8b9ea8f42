/**
 * The result of one benchmark scenario, as each scenario script writes it (JSON, `--out <file>`) and the report
 * (`npm run bench`) renders it: a table of medians, the targets with whether they were met, and notes.
 */

/** A target, measured. */
export interface TargetResult {
  /** What is compared, e.g. "added latency p50: fhirgate ≤ SDK relay + 1.0 ms". */
  readonly description: string;
  /** fhirgate's measured value, formatted with its unit, e.g. "4.15 ms". */
  readonly measured: string;
  /**
   * The same-run figure the goal is relative to: the SDK relay's (the official SDK with nothing checked or stored),
   * measured in the same run so the machine's noise falls on both. Absent for an absolute goal.
   */
  readonly reference?: string;
  /** The goal for this run, formatted, e.g. "≤ 1.60 ms". */
  readonly target: string;
  readonly met: boolean;
  /**
   * The same goal held against the floor that the history and both records cost (the SDK relay plus the store's
   * history page and two durable writes, bench/contenders/sdk-relay-store.ts): whether it meets it, and by how much
   * it falls short. A goal the floor misses cannot be met by any gateway that sends a conversation's history and
   * keeps fhirgate's records on this machine.
   */
  readonly floor?: { readonly measured: string; readonly met: boolean; readonly shortBy?: string };
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
  /** Further tables of the same run, each under its title (e.g. where a request's CPU time goes). */
  readonly tables?: readonly { readonly title: string; readonly columns: readonly string[]; readonly rows: readonly (readonly (string | number)[])[] }[];
  readonly targets: readonly TargetResult[];
  /** Optional bars for the report's chart, e.g. requests/s per contender. */
  readonly chart?: { readonly title: string; readonly bars: readonly ChartBar[] };
  readonly notes: readonly string[];
}
