/**
 * The load generator, its own process so its CPU is never the contender's: reads one LoadJob (JSON) on stdin,
 * runs it, prints one LoadResult (JSON) on stdout. The orchestrator pins it away from the contender's core.
 */
import { text } from 'node:stream/consumers';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import type { LoadJob, LoadResult, SequentialJob, SequentialResult, StreamsJob, StreamsResult, ThroughputJob, ThroughputResult } from './load-job.ts';

function poolFor(url: string, connections: number): { pool: Pool; path: string } {
  const target = new URL(url);
  // Unlimited keep-alive, as a client SDK keeps its connections: the measured time is the contender's.
  return { pool: new Pool(target.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000, bodyTimeout: 0, headersTimeout: 0 }), path: target.pathname };
}

async function runSequential(job: SequentialJob): Promise<SequentialResult> {
  const { pool, path } = poolFor(job.url, 1);
  const latenciesMs: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  for (let index = 0; index < job.warmupRequests + job.requests; index += 1) {
    const started = performance.now();
    try {
      const response = await pool.request({ path, method: 'POST', headers: job.headers, body: job.bodies[index % job.bodies.length] });
      const body = await response.body.text();
      if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}: ${body.slice(0, 300)}`);
    } catch (error) {
      if (index >= job.warmupRequests) errors += 1;
      firstError ??= String(error);
      continue;
    }
    if (index >= job.warmupRequests) latenciesMs.push(performance.now() - started);
  }
  await pool.close();
  return { kind: 'sequential', latenciesMs, errors, firstError };
}

async function runThroughput(job: ThroughputJob): Promise<ThroughputResult> {
  let next = 0;
  const options = {
    url: job.url,
    method: 'POST',
    headers: { ...job.headers },
    connections: job.connections,
    timeout: 30,
    requests: [{ method: 'POST', setupRequest: (request: { body?: string }) => ({ ...request, body: job.bodies[next++ % job.bodies.length] }) }],
  };
  if (job.warmupSeconds > 0) await autocannon({ ...options, duration: job.warmupSeconds });
  const result = await autocannon({ ...options, duration: job.durationSeconds });
  return {
    kind: 'throughput',
    requestsPerSecond: result.requests.total / result.duration,
    completed: result.requests.total,
    errors: result.errors + result.timeouts + result.non2xx,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
  };
}

const DATA_EVENT = /^data:/gm;
// A `content` string that is not empty: chunks carry `"content":"<text>"` in their delta (JSON, so a quote inside the
// text is escaped and the first character after the opening quote is never another quote).
const NON_EMPTY_CONTENT = /"content":"[^"]/;

async function runStreams(job: StreamsJob): Promise<StreamsResult> {
  const { pool, path } = poolFor(job.url, job.concurrency);
  const firstByteMs: number[] = [];
  const firstContentMs: number[] = [];
  let events = 0;
  let completed = 0;
  let errors = 0;
  let firstError: string | undefined;
  let issued = 0;

  async function streamOnce(index: number, measured: boolean): Promise<void> {
    const started = performance.now();
    let firstByteAt: number | undefined;
    let firstContentAt: number | undefined;
    let body = '';
    try {
      const response = await pool.request({
        path,
        method: 'POST',
        headers: job.headers,
        body: job.bodies[index % job.bodies.length],
        signal: AbortSignal.timeout(job.timeoutMs),
      });
      for await (const chunk of response.body) {
        firstByteAt ??= performance.now();
        body += (chunk as Buffer).toString();
        if (firstContentAt === undefined && NON_EMPTY_CONTENT.test(body)) firstContentAt = performance.now();
      }
      if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}: ${body.slice(0, 300)}`);
      if (!body.includes('[DONE]')) throw new Error(`stream ended without [DONE]: ${body.slice(-300)}`);
    } catch (error) {
      if (measured) errors += 1;
      firstError ??= String(error);
      return;
    }
    if (!measured) return;
    completed += 1;
    events += body.match(DATA_EVENT)?.length ?? 0;
    if (firstByteAt !== undefined) firstByteMs.push(firstByteAt - started);
    if (firstContentAt !== undefined) firstContentMs.push(firstContentAt - started);
  }

  async function client(measured: boolean, total: number): Promise<void> {
    while (issued < total) {
      const index = issued;
      issued += 1;
      await streamOnce(index, measured);
    }
  }

  const clients = (measured: boolean, total: number): Promise<void[]> =>
    Promise.all(Array.from({ length: Math.min(job.concurrency, total) }, () => client(measured, total)));
  await clients(false, job.warmupRequests);
  issued = 0;
  const wallStarted = performance.now();
  await clients(true, job.requests);
  const wallMs = performance.now() - wallStarted;
  await pool.close();
  return { kind: 'streams', firstByteMs, firstContentMs, events, completed, errors, firstError, wallMs };
}

function runJob(job: LoadJob): Promise<LoadResult> {
  switch (job.kind) {
    case 'sequential':
      return runSequential(job);
    case 'throughput':
      return runThroughput(job);
    case 'streams':
      return runStreams(job);
  }
}

const job = JSON.parse(await text(process.stdin)) as LoadJob;
const result = await runJob(job);
process.stdout.write(`${JSON.stringify(result)}\n`);
