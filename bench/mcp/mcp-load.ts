/**
 * Scenario 12's load generator, its own process (pinned to the load core) so its CPU is never the host's: reads one
 * McpLoadJob (JSON) on stdin, sends its request from `concurrency` clients at once, each waiting for its answer
 * before the next, for a warm-up then a measured time, and prints one McpLoadResult (JSON) on stdout. Every answer
 * is checked: HTTP 200, and for an MCP call a JSON-RPC result that is no tool error (`isError`), so a refusal
 * never passes for a fast answer.
 */
import { text } from 'node:stream/consumers';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { percentile } from '../lib/statistics.ts';
import type { PreparedRequest } from './mcp-requests.ts';

/** One measurement. */
export interface McpLoadJob {
  readonly request: PreparedRequest;
  readonly concurrency: number;
  readonly warmupSeconds: number;
  readonly durationSeconds: number;
}

/** What it measured: latency percentiles to the answer's last byte, answers per second. */
export interface McpLoadResult {
  readonly completed: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly p99Ms: number;
  /** Transport errors, statuses other than 200, JSON-RPC errors and tool errors, in the measured time. */
  readonly errors: number;
  readonly firstError?: string;
}

/** Why an answer is not a success, or undefined when it is. */
export function answerProblem(request: PreparedRequest, status: number, body: string): string | undefined {
  if (status !== 200) {
    return `status ${status}: ${body.slice(0, 300)}`;
  }
  if (request.method === 'GET') {
    return undefined;
  }
  // A JSON body, or one SSE event whose data is the JSON-RPC answer; the tool's text is a JSON string inside it,
  // so its quotes are escaped and only the answer's own fields match here.
  if (!body.includes('"result":')) {
    return `no JSON-RPC result: ${body.slice(0, 300)}`;
  }
  if (body.includes('"isError":true')) {
    return `a tool error: ${body.slice(0, 300)}`;
  }
  return undefined;
}

async function runJob(job: McpLoadJob): Promise<McpLoadResult> {
  const target = new URL(job.request.url);
  const pool = new Pool(target.origin, { connections: job.concurrency, pipelining: 1, keepAliveTimeout: 60_000 });
  const path = `${target.pathname}${target.search}`;
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let measuring = false;
  let stopAt = performance.now() + job.warmupSeconds * 1000;
  const client = async (): Promise<void> => {
    while (performance.now() < stopAt) {
      const counted = measuring;
      const started = performance.now();
      let problem: string | undefined;
      try {
        const response = await pool.request({ path, method: job.request.method, headers: job.request.headers, body: job.request.body });
        problem = answerProblem(job.request, response.statusCode, await response.body.text());
      } catch (error) {
        problem = String(error);
      }
      // A request started in the warm-up is not counted, whenever it ends.
      if (!counted || !measuring) continue;
      if (problem === undefined) latencies.push(performance.now() - started);
      else {
        errors += 1;
        firstError ??= problem;
      }
    }
  };
  if (job.warmupSeconds > 0) await Promise.all(Array.from({ length: job.concurrency }, client));
  measuring = true;
  const measuredFrom = performance.now();
  stopAt = measuredFrom + job.durationSeconds * 1000;
  await Promise.all(Array.from({ length: job.concurrency }, client));
  const elapsedSeconds = (performance.now() - measuredFrom) / 1000;
  await pool.close();
  return {
    completed: latencies.length,
    requestsPerSecond: latencies.length / elapsedSeconds,
    p50Ms: percentile(latencies, 50),
    p95Ms: percentile(latencies, 95),
    p99Ms: percentile(latencies, 99),
    errors,
    firstError,
  };
}

if (process.argv[1]?.endsWith('mcp-load.ts')) {
  const job = JSON.parse(await text(process.stdin)) as McpLoadJob;
  process.stdout.write(`${JSON.stringify(await runJob(job))}\n`);
}
