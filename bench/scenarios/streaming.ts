/**
 * Scenario 3: streaming, 100-token replies, one client at a time. Time-to-first-byte overhead (contender − direct)
 * and the contender's CPU time per streamed chunk (its /proc utime + stime over the measured streams, divided by
 * the SSE events the client received).
 */
import { figuresOf, floorTarget, relativeTarget } from '../lib/relative-target.ts';
import type { ScenarioSection } from '../lib/section.ts';
import { readCpuSeconds } from '../lib/processes.ts';
import { formatNumber, formatRatio, median, percentile } from '../lib/statistics.ts';
import { runLoad } from '../load/run-load.ts';
import type { StreamsJob, StreamsResult } from '../load/load-job.ts';
import { measureInterleaved, writeRaw, type BenchContext } from './bench-context.ts';

const UPSTREAM = { latencyMs: 0, replyTokens: 100 };

interface StreamingRun {
  readonly result: StreamsResult;
  /** CPU seconds the contender used over the measured streams; NaN for direct. */
  readonly cpuSeconds: number;
}

export async function measureStreaming(context: BenchContext): Promise<ScenarioSection> {
  const warmupRequests = context.smoke ? 5 : 20;
  const requests = context.smoke ? 20 : 150;
  await context.emulator.setBehaviour(UPSTREAM);
  const results = await measureInterleaved(context, context.contenders, async (contender): Promise<StreamingRun> => {
    const job: StreamsJob = { kind: 'streams', url: contender.chatUrl, headers: contender.headers, bodies: contender.bodies(true), concurrency: 1, warmupRequests: 0, requests: warmupRequests, timeoutMs: 30_000 };
    // Warm-up in its own run, so the CPU reading below covers the measured streams only.
    await runLoad<StreamsResult>(job, context.layout.generatorCore);
    const cpuBefore = contender.pid === undefined ? Number.NaN : readCpuSeconds(contender.pid);
    const result = await runLoad<StreamsResult>({ ...job, requests }, context.layout.generatorCore);
    const cpuAfter = contender.pid === undefined ? Number.NaN : readCpuSeconds(contender.pid);
    return { result, cpuSeconds: cpuAfter - cpuBefore };
  });
  await writeRaw(context, 'scenario-3-streaming', Object.fromEntries(results));

  const direct = results.get('direct') ?? [];
  const summary = context.contenders.map((contender) => {
    const runs = results.get(contender.name) ?? [];
    // Overhead per repetition against direct's of the same repetition, then the median over repetitions.
    const overhead = (pick: (result: StreamsResult) => readonly number[], p: number): number =>
      median(runs.map((run, index) => percentile(pick(run.result), p) - percentile(direct[index] ? pick(direct[index].result) : [], p)));
    return {
      name: contender.name,
      firstByteP50: median(runs.map((run) => percentile(run.result.firstByteMs, 50))),
      firstContentP50: median(runs.map((run) => percentile(run.result.firstContentMs, 50))),
      overheadP50: overhead((result) => result.firstContentMs, 50),
      overheadP99: overhead((result) => result.firstContentMs, 99),
      eventsPerStream: median(runs.map((run) => run.result.events / Math.max(1, run.result.completed))),
      cpuMicrosecondsPerChunk: median(runs.map((run) => (run.cpuSeconds * 1e6) / Math.max(1, run.result.events))),
      errors: runs.reduce((sum, run) => sum + run.result.errors, 0),
      firstError: runs.find((run) => run.result.firstError)?.result.firstError,
    };
  });
  const relay = summary.find((row) => row.name === 'SDK relay');
  const targets = [
    relativeTarget(
      {
        description: 'time to the first content token, overhead p50: fhirgate ≤ SDK relay + 1.5 ms',
        direction: 'at-most',
        goal: (relay) => relay + 1.5,
        format: (value) => `${formatNumber(value)} ms`,
      },
      figuresOf(summary, (row) => row.overheadP50),
    ),
    relativeTarget(
      {
        description: 'CPU per streamed chunk: fhirgate ≤ 1.5 × SDK relay',
        direction: 'at-most',
        goal: (relay) => 1.5 * relay,
        format: (value) => `${formatNumber(value, 1)} µs`,
      },
      figuresOf(summary, (row) => row.cpuMicrosecondsPerChunk),
    ),
    floorTarget(
      {
        description: 'CPU per streamed chunk at its floor: fhirgate ≤ 1.05 × SDK relay + store',
        direction: 'at-most',
        goal: (floor) => 1.05 * floor,
        format: (value) => `${formatNumber(value, 1)} µs`,
      },
      figuresOf(summary, (row) => row.cpuMicrosecondsPerChunk),
    ),
  ].filter((target) => target !== undefined);
  return {
    title: '3. Streaming, 100-token replies',
    method:
      `One client, one stream at a time, ${warmupRequests} warm-up streams then ${requests} measured, ${context.repetitions} repetition(s) interleaved. ` +
      `Upstream: ${UPSTREAM.latencyMs} ms, ${UPSTREAM.replyTokens} tokens as fast as the socket takes them. First byte = first body chunk received; ` +
      'first content = the first event whose `delta.content` is not empty (an early empty `role` chunk does not count); ' +
      'overhead = contender − direct (first content) in the same repetition. CPU per chunk = the contender process\'s utime + stime (/proc/<pid>/stat) over the measured streams ' +
      '÷ SSE `data:` events the client received (clock-tick resolution, 10 ms, over thousands of chunks).',
    table: {
      columns: ['contender', 'first byte p50 ms', 'first content p50 ms', 'overhead p50 ms', 'overhead p99 ms', 'events/stream', 'CPU µs/chunk', 'CPU vs SDK relay', 'errors'],
      rows: summary.map((row) => [
        row.name,
        formatNumber(row.firstByteP50),
        formatNumber(row.firstContentP50),
        row.name === 'direct' ? '—' : formatNumber(row.overheadP50),
        row.name === 'direct' ? '—' : formatNumber(row.overheadP99),
        formatNumber(row.eventsPerStream, 0),
        row.name === 'direct' ? '—' : formatNumber(row.cpuMicrosecondsPerChunk, 1),
        row.name === 'direct' || !relay ? '—' : formatRatio(row.cpuMicrosecondsPerChunk, relay.cpuMicrosecondsPerChunk),
        row.errors,
      ]),
    },
    targets,
    chart: {
      title: 'Streaming: CPU per streamed chunk (µs, lower is better)',
      bars: summary.filter((row) => row.name !== 'direct').map((row) => ({ label: row.name, value: row.cpuMicrosecondsPerChunk, unit: 'µs' })),
    },
    notes: summary.filter((row) => row.firstError).map((row) => `${row.name}: first error: ${row.firstError}`),
  };
}
