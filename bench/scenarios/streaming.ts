/**
 * Scenario 3: streaming, 100-token replies, one client at a time. Time-to-first-byte overhead (contender − direct)
 * and the contender's CPU time per streamed chunk (its /proc utime + stime over the measured streams, divided by
 * the SSE events the client received).
 */
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
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
    const firstByteP50 = runs.map((run) => percentile(run.result.firstByteMs, 50));
    const overheadP50 = firstByteP50.map((value, index) => value - percentile(direct[index]?.result.firstByteMs ?? [], 50));
    const firstByteP99 = runs.map((run) => percentile(run.result.firstByteMs, 99));
    const overheadP99 = firstByteP99.map((value, index) => value - percentile(direct[index]?.result.firstByteMs ?? [], 99));
    return {
      name: contender.name,
      firstByteP50: median(firstByteP50),
      overheadP50: median(overheadP50),
      overheadP99: median(overheadP99),
      eventsPerStream: median(runs.map((run) => run.result.events / Math.max(1, run.result.completed))),
      cpuMicrosecondsPerChunk: median(runs.map((run) => (run.cpuSeconds * 1e6) / Math.max(1, run.result.events))),
      errors: runs.reduce((sum, run) => sum + run.result.errors, 0),
      firstError: runs.find((run) => run.result.firstError)?.result.firstError,
    };
  });
  const portkey = summary.find((row) => row.name === 'Portkey');
  const fhirgate = summary.find((row) => row.name === 'fhirgate');
  const relay = summary.find((row) => row.name === 'SDK relay');
  const targets: TargetResult[] = [];
  if (fhirgate) {
    targets.push({
      description: 'time-to-first-byte overhead p50: fhirgate ≤ 1 ms',
      measured: `${formatNumber(fhirgate.overheadP50)} ms`,
      target: '≤ 1 ms',
      met: fhirgate.overheadP50 <= 1,
      floor: relay && { measured: `${formatNumber(relay.overheadP50)} ms`, met: relay.overheadP50 <= 1 },
    });
  }
  return {
    title: '3. Streaming, 100-token replies',
    method:
      `One client, one stream at a time, ${warmupRequests} warm-up streams then ${requests} measured, ${context.repetitions} repetition(s) interleaved. ` +
      `Upstream: ${UPSTREAM.latencyMs} ms, ${UPSTREAM.replyTokens} tokens as fast as the socket takes them. First byte = first body chunk received; ` +
      'overhead = contender − direct in the same repetition. CPU per chunk = the contender process\'s utime + stime (/proc/<pid>/stat) over the measured streams ' +
      '÷ SSE `data:` events the client received (clock-tick resolution, 10 ms, over thousands of chunks).',
    table: {
      columns: ['contender', 'first byte p50 ms', 'overhead p50 ms', 'overhead p99 ms', 'events/stream', 'CPU µs/chunk', 'CPU vs Portkey', 'errors'],
      rows: summary.map((row) => [
        row.name,
        formatNumber(row.firstByteP50),
        row.name === 'direct' ? '—' : formatNumber(row.overheadP50),
        row.name === 'direct' ? '—' : formatNumber(row.overheadP99),
        formatNumber(row.eventsPerStream, 0),
        row.name === 'direct' ? '—' : formatNumber(row.cpuMicrosecondsPerChunk, 1),
        row.name === 'direct' || !portkey ? '—' : formatRatio(row.cpuMicrosecondsPerChunk, portkey.cpuMicrosecondsPerChunk),
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
