/** What the orchestrator asks of the load generator process, and what it answers (one JSON each way). */

interface TargetedJob {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Bodies cycled through, one per request. */
  readonly bodies: readonly string[];
}

/** One client, one request at a time: per-request latency to the end of the body. */
export interface SequentialJob extends TargetedJob {
  readonly kind: 'sequential';
  readonly warmupRequests: number;
  readonly requests: number;
}

/** autocannon with N connections for a fixed time: saturated throughput. */
export interface ThroughputJob extends TargetedJob {
  readonly kind: 'throughput';
  readonly connections: number;
  readonly warmupSeconds: number;
  readonly durationSeconds: number;
}

/** Streamed requests, `concurrency` at a time: time to first body byte, SSE events counted. */
export interface StreamsJob extends TargetedJob {
  readonly kind: 'streams';
  readonly concurrency: number;
  readonly warmupRequests: number;
  readonly requests: number;
  readonly timeoutMs: number;
}

export type LoadJob = SequentialJob | ThroughputJob | StreamsJob;

export interface SequentialResult {
  readonly kind: 'sequential';
  readonly latenciesMs: readonly number[];
  readonly errors: number;
  readonly firstError?: string;
}

export interface ThroughputResult {
  readonly kind: 'throughput';
  readonly requestsPerSecond: number;
  readonly completed: number;
  /** Transport errors, timeouts and non-2xx answers. */
  readonly errors: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
}

export interface StreamsResult {
  readonly kind: 'streams';
  readonly firstByteMs: readonly number[];
  /**
   * From the request to the first event with a non-empty `delta.content`: the first token a user sees (an empty
   * `role` chunk sent early does not count).
   */
  readonly firstContentMs: readonly number[];
  /** SSE `data:` events received over all measured streams (the terminator included). */
  readonly events: number;
  readonly completed: number;
  readonly errors: number;
  readonly firstError?: string;
  readonly wallMs: number;
}

export type LoadResult = SequentialResult | ThroughputResult | StreamsResult;
