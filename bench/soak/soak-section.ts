/**
 * The soak's report section: one row per window (turns per second, latency, errors, the device's Observations,
 * the host's event-loop delay and memory), the verdict "the last window within 10 % of the first" for throughput
 * and median latency, and integrity: every answered turn's prompt and reply stored, every posted Observation
 * stored. The verdict asks whether the host slowed down: a last window more than 10 % slower than the first
 * misses it, a faster one does not.
 */
import type { EventLoopDelay } from '../lib/event-loop-delay.ts';
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
import { formatNumber, percentile } from '../lib/statistics.ts';
import type { SoakLoadPlan, SoakLoadResult, SoakWindow } from './soak-load.ts';
import type { StoredRecords } from './stored-records.ts';

/** The host's side of one window. */
export interface SoakHostWindow {
  readonly eventLoop: EventLoopDelay;
  readonly residentBytes: number;
  /** CPU the host used in the window (user + system). */
  readonly cpuSeconds: number;
  /** The CPU time, µs, of each unit of the fixed-cost reference on the host's core that ended in the window. */
  readonly referenceMicros: readonly number[];
}

/** Everything the soak measured. */
export interface SoakMeasurement {
  readonly plan: SoakLoadPlan;
  readonly load: SoakLoadResult;
  readonly hostWindows: readonly SoakHostWindow[];
  readonly stored: StoredRecords;
  readonly pinned: boolean;
  readonly smoke: boolean;
}

/** The last window may differ from the first by this much. */
const DRIFT_TARGET = 0.1;

/** The section "Soak". */
export function buildSoakSection(measurement: SoakMeasurement): ScenarioSection {
  const { plan, load, hostWindows, stored } = measurement;
  const windows = load.windows;
  const rate = (window: SoakWindow): number => window.turns / plan.windowSeconds;
  const cpuPerTurn = (window: SoakWindow): number => ((hostWindows[windows.indexOf(window)]?.cpuSeconds ?? Number.NaN) * 1000) / window.turns;
  const referenceOf = (window: SoakWindow): number => referenceMs(hostWindows[windows.indexOf(window)]);
  const unitsPerTurn = (window: SoakWindow): number => cpuPerTurn(window) / referenceOf(window);
  const rows = windows.map((window, index) => {
    const host = hostWindows[index];
    return [
      `${window.startSeconds}–${window.startSeconds + plan.windowSeconds} s`,
      round(rate(window)),
      round(percentile(window.latenciesMs, 50)),
      round(percentile(window.latenciesMs, 99)),
      window.turnErrors + window.observationErrors,
      window.observations,
      // The host's share of its core: below 100 % under a load that never lets it idle, other processes had the core.
      Math.round(((host?.cpuSeconds ?? Number.NaN) / plan.windowSeconds) * 100),
      round(cpuPerTurn(window)),
      round(referenceOf(window)),
      Math.round(unitsPerTurn(window) * 1000) / 1000,
      round(host?.eventLoop.p99Ms ?? Number.NaN),
      round(host?.eventLoop.maxMs ?? Number.NaN),
      Math.round((host?.residentBytes ?? Number.NaN) / 1024 / 1024),
    ];
  });
  const first = windows[0];
  const last = windows[windows.length - 1];
  const unitsChange = unitsPerTurn(last) / unitsPerTurn(first) - 1;
  const throughputChange = rate(last) / rate(first) - 1;
  const medianChange = percentile(last.latenciesMs, 50) / percentile(first.latenciesMs, 50) - 1;
  const percent = (value: number): string => `${value >= 0 ? '+' : ''}${formatNumber(value * 100, 1)} %`;
  const targets: TargetResult[] = [
    {
      description: 'throughput, last window vs first',
      measured: `${formatNumber(rate(last), 1)} vs ${formatNumber(rate(first), 1)} turns/s (${percent(throughputChange)})`,
      target: `within ${DRIFT_TARGET * 100} % (not lower by more)`,
      met: throughputChange >= -DRIFT_TARGET,
    },
    {
      description: 'median turn latency, last window vs first',
      measured: `${formatNumber(percentile(last.latenciesMs, 50))} vs ${formatNumber(percentile(first.latenciesMs, 50))} ms (${percent(medianChange)})`,
      target: `within ${DRIFT_TARGET * 100} % (not higher by more)`,
      met: medianChange <= DRIFT_TARGET,
    },
    {
      // The host's own work per turn, which a machine shared with other processes does not change: it grows when
      // a turn's cost grows with the data.
      description: 'host CPU per turn, last window vs first',
      measured: `${formatNumber(cpuPerTurn(last))} vs ${formatNumber(cpuPerTurn(first))} ms (${percent(cpuPerTurn(last) / cpuPerTurn(first) - 1)})`,
      target: `within ${DRIFT_TARGET * 100} % (not higher by more)`,
      met: cpuPerTurn(last) / cpuPerTurn(first) - 1 <= DRIFT_TARGET,
    },
    {
      // The same, measured in units of the fixed-cost reference beside the host: the machine's drift taken out.
      description: 'host CPU per turn in units of the fixed-cost reference, last window vs first',
      measured: `${unitsPerTurn(last).toFixed(3)} vs ${unitsPerTurn(first).toFixed(3)} units (${percent(unitsChange)}; the reference itself ${percent(referenceOf(last) / referenceOf(first) - 1)})`,
      target: `within ${DRIFT_TARGET * 100} % (not higher by more)`,
      met: unitsChange <= DRIFT_TARGET,
    },
    {
      description: 'integrity: every answered turn\'s prompt and reply stored, no turn failed',
      measured: `${load.turns.toLocaleString('en-US')} turns answered, ${load.turnErrors} failed; ${stored.prompts.toLocaleString('en-US')} prompts and ${stored.replies.toLocaleString('en-US')} replies stored`,
      target: 'equal, 0 failed',
      met: load.turnErrors === 0 && stored.prompts === load.turns && stored.replies === load.turns,
    },
    {
      description: 'integrity: every Observation /graphql answered with an id stored',
      measured: `${load.observations.toLocaleString('en-US')} answered, ${stored.observations.toLocaleString('en-US')} stored (${load.observationErrors} posts refused or failed)`,
      target: 'equal',
      met: stored.observations === load.observations,
    },
  ];
  const minutes = (windows.length * plan.windowSeconds) / 60;
  return {
    title: `Soak. ${formatNumber(minutes, minutes < 1 ? 1 : 0)} minutes of mixed load`,
    method:
      `The host as \`npm start\` runs it (plugin/hosts/standalone/main.ts with its Node flags, a fresh data folder, the demo project, ` +
      `the demo device, the device documents on the partial GraphQL engine built at the first /graphql, SQLite synchronous=FULL), the loopback LLM emulator (latency 0, 20-token replies)` +
      `${measurement.pinned ? ', the host pinned to core 1, emulator and load on core 0' : ' (taskset unavailable: not pinned)'}. ` +
      `${plan.users} clients with the demo practitioner's token, each continuing a conversation of its own as fast as it is answered ` +
      `(the first turn starts it): ${plan.streamingUsers} streaming, ${plan.users - plan.streamingUsers} JSON; ${plan.patientUsers} of them ` +
      `about Maria Lopez (a care-team patient, her chart shared as a summary), the rest without a patient. The demo device posts an ` +
      `ObservationCreate through /graphql every ${plan.devicePeriodMs} ms (its own token). Per ${plan.windowSeconds}-second window: turns ` +
      `answered per second, turn latency to the last byte (p50, p99), errors (turns and posts), Observations posted, the host's ` +
      `CPU (/proc: its share of its core, and per turn; the load never lets it idle, so a share below 100 % is the core taken by ` +
      `other processes, and CPU per turn is what shows the host's own work growing), the fixed-cost reference (bench/lib/reference-load.ts, ` +
      `on the host's core: once a second the same unit of work, JSON, a hash and a walk over 32 MB that misses the caches; the ` +
      `window's median CPU time a unit, which rises only when the machine slows) and the host's CPU per turn in its units, its event-loop delay (its /metrics, read ` +
      `at each window's end) and resident memory. At the end the stored prompts, replies ` +
      `and Observations are counted through the FHIR API (_total=accurate, the demo integration's client).` +
      `${measurement.smoke ? ' SMOKE RUN: half a minute, numbers not meaningful.' : ''}`,
    table: {
      columns: ['window', 'turns/s', 'p50 ms', 'p99 ms', 'errors', 'Observations posted', 'host CPU %', 'host CPU ms per turn', 'reference ms per unit', 'host CPU per turn, reference units', 'event loop p99 ms', 'event loop max ms', 'host RSS MB'],
      rows,
    },
    targets,
    notes: [
      trendNote(windows, rate),
      ...(load.firstError ? [`First error the load saw: ${load.firstError}`] : []),
    ],
  };
}

/** One window is noisy on a shared machine: the first and last few, side by side, show the trend. */
function trendNote(windows: readonly SoakWindow[], rate: (window: SoakWindow) => number): string {
  const span = Math.max(1, Math.min(5, Math.floor(windows.length / 3)));
  const summary = (part: readonly SoakWindow[]): string =>
    `${formatNumber(percentile(part.map(rate), 50), 1)} turns/s, p50 ${formatNumber(percentile(part.flatMap((window) => window.latenciesMs), 50))} ms`;
  return `Medians of the first ${span} windows: ${summary(windows.slice(0, span))}; of the last ${span}: ${summary(windows.slice(-span))}.`;
}

/** The window's median CPU time of a reference unit, ms (NaN when none ended in it). */
function referenceMs(host: SoakHostWindow | undefined): number {
  return host && host.referenceMicros.length > 0 ? percentile(host.referenceMicros, 50) / 1000 : Number.NaN;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
