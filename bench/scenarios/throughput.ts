/** Scenario 2: saturated throughput, 0 ms upstream, 32 concurrent clients (autocannon), requests per second. */
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
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
  type Row = (typeof summary)[number];
  const portkey = summary.find((row) => row.name === 'Portkey');
  const fhirgate = summary.find((row) => row.name === 'fhirgate');
  const relay = summary.find((row) => row.name === 'SDK relay');
  const targets: TargetResult[] = [];
  if (portkey && fhirgate) {
    const meets = (row: Row): boolean => row.requestsPerSecond >= 1.5 * portkey.requestsPerSecond;
    targets.push({
      description: 'requests/s: fhirgate ≥ 1.5 × Portkey',
      measured: `${formatNumber(fhirgate.requestsPerSecond, 0)} vs ${formatNumber(portkey.requestsPerSecond, 0)} (${formatRatio(fhirgate.requestsPerSecond, portkey.requestsPerSecond)})`,
      target: '≥ 1.5 ×',
      met: meets(fhirgate),
      floor: relay && {
        measured: `${formatNumber(relay.requestsPerSecond, 0)} (${formatRatio(relay.requestsPerSecond, portkey.requestsPerSecond)})`,
        met: meets(relay),
      },
    });
  }
  return {
    title: '2. Saturated throughput, 32 clients',
    method:
      `autocannon (in the load-generator process), ${THROUGHPUT_CONNECTIONS} connections, ${warmupSeconds} s warm-up then ${durationSeconds} s measured, ` +
      `${context.repetitions} repetition(s) interleaved. Upstream: ${UPSTREAM.latencyMs} ms, ${UPSTREAM.replyTokens}-token fixed reply, non-streaming. ` +
      'Errors count transport errors, timeouts and non-2xx answers. Medians over repetitions.',
    table: {
      columns: ['contender', 'requests/s', 'vs Portkey', 'latency p50 ms', 'latency p99 ms', 'completed', 'errors'],
      rows: summary.map((row) => [
        row.name,
        formatNumber(row.requestsPerSecond, 0),
        portkey ? formatRatio(row.requestsPerSecond, portkey.requestsPerSecond) : '—',
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
