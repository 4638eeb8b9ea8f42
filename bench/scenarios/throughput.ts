/** Scenario 2: saturated throughput, 0 ms upstream, 32 concurrent clients (autocannon), requests per second. */
import { figuresOf, floorTarget, relativeTarget } from '../lib/relative-target.ts';
import type { ScenarioSection } from '../lib/section.ts';
import { formatNumber, formatRatio, median } from '../lib/statistics.ts';
import { runLoad } from '../load/run-load.ts';
import type { ThroughputResult } from '../load/load-job.ts';
import { measureInterleaved, writeRaw, type BenchContext } from './bench-context.ts';

const UPSTREAM = { latencyMs: 0, replyTokens: 20 };
export const THROUGHPUT_CONNECTIONS = 32;

export async function measureThroughput(context: BenchContext): Promise<ScenarioSection> {
  const warmupSeconds = context.smoke ? 1 : 2;
  const durationSeconds = context.smoke ? 2 : 6;
  await context.emulator.setBehaviour(UPSTREAM);
  const results = await measureInterleaved(context, context.contenders, (contender) =>
    runLoad<ThroughputResult>(
      { kind: 'throughput', url: contender.chatUrl, headers: contender.headers, bodies: contender.bodies(false), connections: THROUGHPUT_CONNECTIONS, warmupSeconds, durationSeconds },
      context.layout.generatorCore,
    ),
  );
  await writeRaw(context, 'scenario-2-throughput', Object.fromEntries(results));

  const summary = context.contenders.map((contender) => {
    const runs = results.get(contender.name) ?? [];
    return {
      name: contender.name,
      requestsPerSecond: median(runs.map((run) => run.requestsPerSecond)),
      latencyP50: median(runs.map((run) => run.latencyP50Ms)),
      latencyP99: median(runs.map((run) => run.latencyP99Ms)),
      errors: runs.reduce((sum, run) => sum + run.errors, 0),
      completed: runs.reduce((sum, run) => sum + run.completed, 0),
    };
  });
  const relay = summary.find((row) => row.name === 'SDK relay');
  const targets = [
    relativeTarget(
      {
        description: `requests/s at ${THROUGHPUT_CONNECTIONS} clients: fhirgate ≥ 0.33 × SDK relay`,
        direction: 'at-least',
        goal: (relay) => 0.33 * relay,
        format: (value) => `${formatNumber(value, 0)}/s`,
      },
      figuresOf(summary, (row) => row.requestsPerSecond),
    ),
    floorTarget(
      {
        description: `requests/s at ${THROUGHPUT_CONNECTIONS} clients at its floor: fhirgate ≥ 0.9 × SDK relay + store`,
        direction: 'at-least',
        goal: (floor) => 0.9 * floor,
        format: (value) => `${formatNumber(value, 0)}/s`,
      },
      figuresOf(summary, (row) => row.requestsPerSecond),
    ),
  ].filter((target) => target !== undefined);
  return {
    title: '2. Saturated throughput, 32 clients',
    method:
      `autocannon (in the load-generator process), ${THROUGHPUT_CONNECTIONS} connections, ${warmupSeconds} s warm-up then ${durationSeconds} s measured, ` +
      `${context.repetitions} repetition(s) interleaved. Upstream: ${UPSTREAM.latencyMs} ms, ${UPSTREAM.replyTokens}-token fixed reply, non-streaming. ` +
      'Errors count transport errors, timeouts and non-2xx answers. Medians over repetitions. fhirgate and the SDK relay + store store both Communications durably before answering.',
    table: {
      columns: ['contender', 'requests/s', 'vs SDK relay', 'latency p50 ms', 'latency p99 ms', 'completed', 'errors'],
      rows: summary.map((row) => [
        row.name,
        formatNumber(row.requestsPerSecond, 0),
        relay ? formatRatio(row.requestsPerSecond, relay.requestsPerSecond) : '—',
        formatNumber(row.latencyP50, 1),
        formatNumber(row.latencyP99, 1),
        row.completed,
        row.errors,
      ]),
    },
    targets,
    chart: {
      title: `Saturated throughput, ${THROUGHPUT_CONNECTIONS} clients (requests/s, higher is better)`,
      bars: summary.map((row) => ({ label: row.name, value: row.requestsPerSecond, unit: 'req/s' })),
    },
    notes: [],
  };
}
