/**
 * Turns the history benchmark's samples into its report section: medians and p99 per store and conversation,
 * the two targets of issue 6 (per store and per conversation), and notes on how the stores were built.
 */
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
import { formatNumber, median, percentile } from '../lib/statistics.ts';
import type { HistoryRunSize } from '../history.ts';
import type { SeededStore } from './seed-store.ts';
import { OPTIMISATION_NOTES } from './optimisation-notes.ts';

/** What was measured on one store. */
export interface StoreMeasurement {
  readonly label: string;
  readonly otherCommunications: number;
  readonly seeded: SeededStore;
  readonly seededNow: boolean;
  readonly copySeconds: number;
  /** Latencies in ms per case ('fresh', 'long'), one array per repetition. */
  readonly samples: Readonly<Record<string, readonly (readonly number[])[]>>;
}

interface Summary {
  readonly median: number;
  readonly p99: number;
  readonly repetitionMedians: readonly number[];
}

const ADDED_LATENCY_TARGET_MS = 5;
const LARGE_STORE_SLOWDOWN_TARGET = 0.1;

/** The section "5. History". */
export function buildHistorySection(size: HistoryRunSize, stores: readonly StoreMeasurement[], pinned: boolean): ScenarioSection {
  const [empty, large] = stores;
  const turns = size.longConversationTurns.toLocaleString('en-US');
  const caseLabel = (name: string): string => (name === 'long' ? `${turns} earlier turns` : 'fresh (no earlier turn)');
  const storeLabel = (store: StoreMeasurement): string =>
    store.otherCommunications === 0 ? 'empty' : `${store.otherCommunications.toLocaleString('en-US')} other Communications`;
  const rows: (string | number)[][] = [];
  for (const store of stores) {
    for (const name of ['fresh', 'long']) {
      const summary = summarize(store.samples[name]);
      rows.push([storeLabel(store), caseLabel(name), round(summary.median), round(summary.p99), summary.repetitionMedians.map(round).join(' / ')]);
    }
  }
  const targets: TargetResult[] = [];
  for (const store of stores) {
    const added = summarize(store.samples.long).median - summarize(store.samples.fresh).median;
    targets.push({
      description: `${turns} earlier turns vs fresh, ${storeLabel(store)} store: added median latency`,
      measured: `${formatNumber(added)} ms`,
      target: `≤ ${ADDED_LATENCY_TARGET_MS} ms`,
      met: added <= ADDED_LATENCY_TARGET_MS,
    });
  }
  for (const name of ['long', 'fresh']) {
    const slowdown = summarize(large.samples[name]).median / summarize(empty.samples[name]).median - 1;
    targets.push({
      description: `${storeLabel(large)} vs empty store, ${caseLabel(name)}: median slower by`,
      measured: `${formatNumber(slowdown * 100, 1)} %`,
      target: `≤ ${LARGE_STORE_SLOWDOWN_TARGET * 100} %`,
      met: slowdown <= LARGE_STORE_SLOWDOWN_TARGET,
    });
  }
  return {
    title: '5. History',
    method:
      `POST /v1/chat/completions (JSON, non-streaming) continuing a conversation of the demo practitioner about a care-team patient, ` +
      `through the standalone host (SQLite store, synchronous=FULL) and the loopback LLM emulator (latency 0). One host per store, ` +
      `side by side; hosts, emulator and load are separate processes` +
      `${pinned ? ' pinned with taskset (hosts on core 1; emulator and load on core 0)' : ' (taskset unavailable: not pinned)'}. ` +
      `One client, one request at a time; ${size.warmUp} warm-up requests per case, then ${size.repetitions} repetitions of ` +
      `${size.requestsPerRepetition} requests per case, the four cases (2 stores × 2 conversations) taking turns request by request ` +
      `so that machine noise falls on all alike. Median of the repetition medians; p99 over all samples. ` +
      `"Fresh" continues a seeded conversation that has only its root (a new one per request); "long" continues one conversation ` +
      `seeded with ${turns} turns (it gains one turn per request). History caps: 50 messages / 100,000 characters.`,
    table: { columns: ['store', 'conversation', 'median ms', 'p99 ms', 'repetition medians ms'], rows },
    targets,
    chart: {
      title: 'Median latency (ms)',
      bars: stores.flatMap((store) =>
        ['fresh', 'long'].map((name) => ({ label: `${store.label}: ${name}`, value: round(summarize(store.samples[name]).median), unit: 'ms' }))
      ),
    },
    notes: [...stores.map(seedNote), ...OPTIMISATION_NOTES],
  };
}

function seedNote(store: StoreMeasurement): string {
  const seeded =
    `${store.seeded.communications.toLocaleString('en-US')} Communications bulk-inserted in ${formatNumber(store.seeded.seedSeconds, 1)} s ` +
    `(index rows of ${store.seeded.indexRowsChecked} sampled resources checked against the store's own)`;
  const when = store.seededNow ? 'seeded by this run' : 'reused from bench/results/raw/ (seeded by an earlier run)';
  return `Store "${store.label}": ${seeded}, ${when}; copied, flushed to disk and read once into the page cache for the run in ${formatNumber(store.copySeconds, 1)} s.`;
}

function summarize(repetitions: readonly (readonly number[])[] | undefined): Summary {
  const all = (repetitions ?? []).flat();
  const repetitionMedians = (repetitions ?? []).map((samples) => median(samples));
  return { median: median(repetitionMedians), p99: percentile(all, 99), repetitionMedians };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
