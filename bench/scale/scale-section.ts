/**
 * Turns the scale benchmark's samples into its report section: latency per store, the event-loop delay of each
 * host while the turns were measured, and target 7's two goals.
 */
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
import type { EventLoopDelay } from '../lib/event-loop-delay.ts';
import { formatNumber, median, percentile } from '../lib/statistics.ts';
import type { ScaleRunSize } from '../scale.ts';
import type { ScalePlan } from './seed-chart.ts';

/** What was measured on one store. */
export interface ScaleMeasurement {
  readonly label: 'small' | 'large';
  readonly plan: ScalePlan;
  readonly resources: Readonly<Record<string, number>>;
  readonly note: string;
  /** Latencies in ms, one array per repetition. */
  readonly samples: readonly (readonly number[])[] | undefined;
  /** The host's event loop while the measured turns ran. */
  readonly eventLoop: EventLoopDelay;
}

const SLOWDOWN_TARGET = 0.1;
const EVENT_LOOP_P99_TARGET_MS = 20;

/** The section "7. Scale". */
export function buildScaleSection(size: ScaleRunSize, stores: readonly ScaleMeasurement[], pinned: boolean, smoke: boolean): ScenarioSection {
  const count = (value: number): string => value.toLocaleString('en-US');
  const medianOf = (store: ScaleMeasurement): number => median((store.samples ?? []).map((samples) => median(samples)));
  const rows = stores.map((store) => [
    store.label,
    count(store.plan.chartObservations),
    count(store.plan.otherObservations),
    count(store.plan.callerCommunications + store.plan.measuredConversations * (1 + 2 * store.plan.earlierTurns)),
    round(medianOf(store)),
    round(percentile((store.samples ?? []).flat(), 99)),
    (store.samples ?? []).map((samples) => round(median(samples))).join(' / '),
    round(store.eventLoop.p99Ms),
    round(store.eventLoop.maxMs),
  ]);
  const [small, large] = stores;
  const slowdown = medianOf(large) / medianOf(small) - 1;
  const targets: TargetResult[] = [
    {
      description: `a turn about a patient with ${count(large.plan.chartObservations)} Observations (${count(large.plan.otherObservations)} more in the project, ${count(large.plan.callerCommunications)} other Communications of the caller) vs the same turn on the small store: median slower by`,
      measured: `${formatNumber(slowdown * 100, 1)} %`,
      target: `≤ ${SLOWDOWN_TARGET * 100} %`,
      met: slowdown <= SLOWDOWN_TARGET,
    },
    {
      description: 'event-loop delay p99 of the large store\'s host while the turns ran',
      measured: `${formatNumber(large.eventLoop.p99Ms)} ms (max ${formatNumber(large.eventLoop.maxMs)} ms)`,
      target: `< ${EVENT_LOOP_P99_TARGET_MS} ms`,
      met: large.eventLoop.p99Ms < EVENT_LOOP_P99_TARGET_MS,
    },
  ];
  return {
    title: '7. Scale',
    method:
      `POST /v1/chat/completions (JSON) by the demo practitioner about Maria Lopez (a care-team patient; her AccessPolicy narrows every ` +
      `read), sharing her chart as a summary (the default: problems, medications, allergies and the newest 10 Observations, each ` +
      `read as one search with _sort) and continuing a conversation of ${size.earlierTurns} earlier turns (a new one per request, ` +
      `so every turn does the same work), through the standalone host (SQLite, synchronous=FULL) and the loopback LLM emulator ` +
      `(latency 0). Two stores: "small" (her chart with ${count(small.plan.chartObservations)} Observations, nothing else) and ` +
      `"large" (her chart with ${count(large.plan.chartObservations)} Observations; ${count(large.plan.otherObservations)} more in ` +
      `the project, 30 % from monitors, the rest in other patients' charts; ${count(large.plan.callerCommunications)} other ` +
      `Communications of the practitioner's own conversations). One host per store, side by side` +
      `${pinned ? ', pinned with taskset (hosts on core 1; emulator and load on core 0)' : ' (taskset unavailable: not pinned)'}; ` +
      `one client, one request at a time, ${size.warmUp} warm-up requests per store, then ${size.repetitions} repetitions of ` +
      `${size.requestsPerRepetition} requests per store, alternating between the stores request by request. Median of the ` +
      `repetition medians; p99 over all samples. Event-loop delay: each host's \`fhirgate_host_event_loop_delay_*\` gauges ` +
      `(docs/observability.md), read when the measured requests start and when they end, so they cover exactly the measured turns.` +
      `${smoke ? ' SMOKE RUN: tiny stores, numbers not meaningful.' : ''}`,
    table: {
      columns: ['store', 'chart Observations', 'other Observations', "caller's Communications", 'median ms', 'p99 ms', 'repetition medians ms', 'event loop p99 ms', 'event loop max ms'],
      rows,
    },
    targets,
    chart: { title: 'Scale: median turn (ms)', bars: stores.map((store) => ({ label: `${store.label} store`, value: round(medianOf(store)), unit: 'ms' })) },
    notes: stores.map((store) => store.note),
  };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
