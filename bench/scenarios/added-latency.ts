/**
 * Scenario 1: non-streaming, one client at a time. What each contender adds to the model's own latency:
 * (contender − direct) at p50 and p99, per repetition, then the median over repetitions.
 */
import { figuresOf, floorTarget, relativeTarget } from '../lib/relative-target.ts';
import type { ScenarioSection } from '../lib/section.ts';
import { formatNumber, median, percentile } from '../lib/statistics.ts';
import { runLoad } from '../load/run-load.ts';
import type { SequentialResult } from '../load/load-job.ts';
import { measureInterleaved, writeRaw, type BenchContext } from './bench-context.ts';

const UPSTREAM = { latencyMs: 0, replyTokens: 20 };

export async function measureAddedLatency(context: BenchContext): Promise<ScenarioSection> {
  const warmupRequests = context.smoke ? 10 : 100;
  const requests = context.smoke ? 30 : 600;
  await context.emulator.setBehaviour(UPSTREAM);
  const results = await measureInterleaved(context, context.contenders, (contender) =>
    runLoad<SequentialResult>({ kind: 'sequential', url: contender.chatUrl, headers: contender.headers, bodies: contender.bodies(false), warmupRequests, requests }, context.layout.generatorCore),
  );
  await writeRaw(context, 'scenario-1-added-latency', Object.fromEntries(results));

  const direct = results.get('direct') ?? [];
  const summary = context.contenders.map((contender) => {
    const runs = results.get(contender.name) ?? [];
    const p50 = runs.map((run) => percentile(run.latenciesMs, 50));
    const p99 = runs.map((run) => percentile(run.latenciesMs, 99));
    // Added latency per repetition against the floor of the same repetition, then the median.
    const addedP50 = p50.map((value, index) => value - percentile(direct[index]?.latenciesMs ?? [], 50));
    const addedP99 = p99.map((value, index) => value - percentile(direct[index]?.latenciesMs ?? [], 99));
    return {
      name: contender.name,
      p50: median(p50),
      p99: median(p99),
      addedP50: median(addedP50),
      addedP99: median(addedP99),
      errors: runs.reduce((sum, run) => sum + run.errors, 0),
      firstError: runs.find((run) => run.firstError)?.firstError,
    };
  });
  const milliseconds = (value: number): string => `${formatNumber(value)} ms`;
  const targets = [
    relativeTarget(
      { description: 'added latency p50: fhirgate ≤ SDK relay + 1.0 ms', direction: 'at-most', goal: (relay) => relay + 1.0, format: milliseconds },
      figuresOf(summary, (row) => row.addedP50),
    ),
    relativeTarget(
      { description: 'added latency p99: fhirgate ≤ SDK relay + 5 ms', direction: 'at-most', goal: (relay) => relay + 5, format: milliseconds },
      figuresOf(summary, (row) => row.addedP99),
    ),
    floorTarget(
      { description: 'added latency p50 at its floor: fhirgate ≤ SDK relay + store + 0.5 ms', direction: 'at-most', goal: (floor) => floor + 0.5, format: milliseconds },
      figuresOf(summary, (row) => row.addedP50),
    ),
  ].filter((target) => target !== undefined);
  const relay = summary.find((row) => row.name === 'SDK relay');
  return {
    title: '1. Added latency, non-streaming, one client',
    method:
      `One client, one request at a time over a kept-alive connection, ${warmupRequests} warm-up requests then ${requests} measured, ` +
      `${context.repetitions} repetition(s) interleaved across contenders. Upstream: ${UPSTREAM.latencyMs} ms latency, ${UPSTREAM.replyTokens}-token fixed reply. ` +
      'Latency is to the end of the response body. Added = contender − direct in the same repetition; the table shows medians over repetitions. ' +
      'fhirgate stores the prompt and the reply (two Communications, SQLite, durable before acknowledged) and loads the conversation history on every request ' +
      '(it continues one of the prepared conversations, 3 earlier turns at the start, one more turn per request). ' +
      'SDK relay + store: the SDK relay that also reads the conversation\'s history page and stores the same two Communications as the standalone host does, the prompt before the call and the reply before the answer (the floor).',
    table: {
      columns: ['contender', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', 'added p50 − SDK relay ms', 'errors'],
      rows: summary.map((row) => [
        row.name,
        formatNumber(row.p50),
        formatNumber(row.p99),
        row.name === 'direct' ? '—' : formatNumber(row.addedP50),
        row.name === 'direct' ? '—' : formatNumber(row.addedP99),
        row.name === 'direct' || !relay ? '—' : formatNumber(row.addedP50 - relay.addedP50),
        row.errors,
      ]),
    },
    targets,
    chart: {
      title: 'Added latency p50, non-streaming (ms, lower is better)',
      bars: summary.filter((row) => row.name !== 'direct').map((row) => ({ label: row.name, value: row.addedP50, unit: 'ms' })),
    },
    notes: summary.filter((row) => row.firstError).map((row) => `${row.name}: first error: ${row.firstError}`),
  };
}
