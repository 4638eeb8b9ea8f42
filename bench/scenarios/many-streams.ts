/**
 * Scenario 4: a thousand concurrent streams against a slow upstream. The contender's peak resident memory
 * (VmRSS sampled every 50 ms while the streams run) and the streams that failed. fhirgate is the host every
 * scenario runs, as `npm start` runs it, `/graphql` served.
 */
import { figuresOf, floorTarget, relativeTarget } from '../lib/relative-target.ts';
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
import { readResidentBytes, sampleResidentPeak } from '../lib/processes.ts';
import { formatNumber, median } from '../lib/statistics.ts';
import { runLoad } from '../load/run-load.ts';
import type { StreamsResult } from '../load/load-job.ts';
import { measureInterleaved, writeRaw, type BenchContext } from './bench-context.ts';

const MEGABYTE = 1024 * 1024;

interface ManyStreamsRun {
  readonly result: StreamsResult;
  readonly residentBeforeBytes: number;
  readonly residentPeakBytes: number;
}

/** Scenario 4 against every contender. */
export async function measureManyStreams(context: BenchContext): Promise<ScenarioSection> {
  const { contenders } = context;
  const streams = context.smoke ? 50 : 1000;
  const upstream = context.smoke ? { latencyMs: 200, tokensPerSecond: 50, replyTokens: 10 } : { latencyMs: 1000, tokensPerSecond: 20, replyTokens: 40 };
  await context.emulator.setBehaviour(upstream);
  const results = await measureInterleaved(context, contenders, async (contender): Promise<ManyStreamsRun> => {
    const residentBeforeBytes = contender.pid === undefined ? Number.NaN : readResidentBytes(contender.pid);
    const sampler = contender.pid === undefined ? undefined : sampleResidentPeak(contender.pid);
    const result = await runLoad<StreamsResult>(
      { kind: 'streams', url: contender.chatUrl, headers: contender.headers, bodies: contender.bodies(true), concurrency: streams, warmupRequests: 0, requests: streams, timeoutMs: 120_000 },
      context.layout.generatorCore,
    );
    return { result, residentBeforeBytes, residentPeakBytes: sampler?.stop() ?? Number.NaN };
  });
  await writeRaw(context, 'scenario-4-many-streams', Object.fromEntries(results));

  const summary = contenders.map((contender) => {
    const runs = results.get(contender.name) ?? [];
    return {
      name: contender.name,
      residentBeforeMegabytes: median(runs.map((run) => run.residentBeforeBytes / MEGABYTE)),
      // The worst repetition: a memory target holds for every run, not for the typical one.
      residentPeakMegabytes: Math.max(...runs.map((run) => run.residentPeakBytes / MEGABYTE)),
      // What the streams themselves cost, apart from what the process held before they opened.
      growthMegabytes: median(runs.map((run) => (run.residentPeakBytes - run.residentBeforeBytes) / MEGABYTE)),
      wallSeconds: median(runs.map((run) => run.result.wallMs / 1000)),
      completed: runs.reduce((sum, run) => sum + run.result.completed, 0),
      errors: runs.reduce((sum, run) => sum + run.result.errors, 0),
      firstError: runs.find((run) => run.result.firstError)?.result.firstError,
    };
  });
  const fhirgate = summary.find((row) => row.name === 'fhirgate');
  const relay = summary.find((row) => row.name === 'SDK relay');
  const targets: TargetResult[] = [];
  if (fhirgate) {
    targets.push({
      description: `peak RSS with ${streams} concurrent streams: fhirgate ≤ 400 MB`,
      measured: `${formatNumber(fhirgate.residentPeakMegabytes, 0)} MB`,
      target: '≤ 400 MB',
      met: fhirgate.residentPeakMegabytes <= 400,
      reference: relay && `${formatNumber(relay.residentPeakMegabytes, 0)} MB`,
    });
    const wall = relativeTarget(
      {
        description: `wall time of ${streams} concurrent streams: fhirgate ≤ 1.25 × SDK relay`,
        direction: 'at-most',
        goal: (relay) => 1.25 * relay,
        format: (value) => `${formatNumber(value, 1)} s`,
      },
      figuresOf(summary, (row) => row.wallSeconds),
    );
    if (wall) targets.push(wall);
    const wallAtFloor = floorTarget(
      {
        description: `wall time of ${streams} concurrent streams at its floor: fhirgate ≤ 1.1 × SDK relay + store`,
        direction: 'at-most',
        goal: (floor) => 1.1 * floor,
        format: (value) => `${formatNumber(value, 1)} s`,
      },
      figuresOf(summary, (row) => row.wallSeconds),
    );
    if (wallAtFloor) targets.push(wallAtFloor);
    targets.push({
      description: `failed streams: fhirgate = 0`,
      measured: String(fhirgate.errors),
      target: '0',
      met: fhirgate.errors === 0,
      reference: relay && String(relay.errors),
    });
  }
  return {
    title: `4. ${streams} concurrent streams, slow upstream`,
    method:
      `${streams} streams opened at once, each on its own connection, ${context.repetitions} repetition(s) interleaved. Upstream: ` +
      `${upstream.latencyMs} ms before the first byte, ${upstream.replyTokens} tokens at ${upstream.tokensPerSecond} tokens/s. ` +
      'Peak RSS: the contender process\'s VmRSS (/proc/<pid>/status) sampled every 50 ms, the highest over all repetitions; ' +
      'growth: peak − RSS just before the streams opened (median over repetitions). ' +
      'A stream fails on a non-200 status, a transport error, or an end without `[DONE]`. ' +
      'fhirgate is the host of scenarios 1–3, as `npm start` runs it (`/graphql` served).',
    table: {
      columns: ['contender', 'RSS before MB', 'peak RSS MB', 'growth MB', 'wall s', 'completed', 'errors'],
      rows: summary.map((row) => [
        row.name,
        row.name === 'direct' ? '—' : formatNumber(row.residentBeforeMegabytes, 0),
        row.name === 'direct' ? '—' : formatNumber(row.residentPeakMegabytes, 0),
        row.name === 'direct' ? '—' : formatNumber(row.growthMegabytes, 0),
        formatNumber(row.wallSeconds, 1),
        row.completed,
        row.errors,
      ]),
    },
    targets,
    chart: {
      title: `Peak RSS, ${streams} concurrent streams (MB, lower is better)`,
      bars: summary.filter((row) => row.name !== 'direct').map((row) => ({ label: row.name, value: row.residentPeakMegabytes, unit: 'MB' })),
    },
    notes: summary.filter((row) => row.firstError).map((row) => `${row.name}: first error: ${row.firstError}`),
  };
}
