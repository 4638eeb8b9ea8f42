/**
 * fhirgate's metrics and traces, through `@opentelemetry/api` only: they cost nothing and go nowhere until the
 * host process registers an OpenTelemetry SDK (Medplum's server does when OpenTelemetry is configured; the
 * standalone host does for `/metrics`). Register the meter provider before creating the plugin: the instruments
 * are made once, here.
 *
 * Attributes carry ids and names only (route, status, project id, provider, model, reasons): never a key, a
 * token or message text.
 */
import {
  metrics,
  ProxyTracerProvider,
  trace,
  type Counter,
  type Histogram,
  type MeterProvider,
  type ObservableGauge,
  type Tracer,
  type TracerProvider,
  type UpDownCounter,
} from '@opentelemetry/api';

/** The instrumentation scope's name: the meter and tracer `fhirgate`. */
export const TELEMETRY_SCOPE = 'fhirgate';

// Seconds: a gateway's own work is milliseconds, a model's reply up to minutes.
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** The instruments fhirgate records into; one set per plugin. */
export interface Telemetry {
  readonly tracer: Tracer;
  /** Every plugin request: `http.request.method`, `http.route`, `http.response.status_code`. Its count is the request count. */
  readonly requestDuration: Histogram;
  /** One provider call, to its end: `gen_ai.provider.name`, `gen_ai.request.model`, `fhirgate.project.id`, `error.type` on failure. */
  readonly providerDuration: Histogram;
  /** From the provider call to its first streamed text. */
  readonly timeToFirstToken: Histogram;
  /** Tokens as the provider reported them: `gen_ai.token.type` (`input`, `output`), project, provider, model. */
  readonly tokens: Counter;
  /** What settled turns cost, in US dollars, by the models' prices (models without a price count nothing): `fhirgate.project.id`, `fhirgate.model` (its id, `provider/model`). */
  readonly cost: Counter;
  /** Failed provider calls: `gen_ai.provider.name`, `error.type` (`details.reason` of provider-errors.ts: `http_status`, `timeout`, `connection`, `stream_cut`, ...). */
  readonly upstreamErrors: Counter;
  /** SSE streams open right now. */
  readonly activeStreams: UpDownCounter;
  /** FHIR repository operations chat turns asked of the server: `fhirgate.operation` (`read`, `search`, `write`). */
  readonly repositoryOperations: Counter;
  /** Chat turns waiting for a place among those being prepared (`chatLimits.maxPreparingTurns`). */
  readonly waitingTurns: UpDownCounter;
  /** Device token exchanges: `fhirgate.outcome` (`issued`, `refused`), `fhirgate.reason` for refusals. */
  readonly deviceTokenExchanges: Counter;
  /** Requests refused by a rate limit: `fhirgate.limit` (`device`, `failed_attempts_source`, `failed_attempts_device`). */
  readonly rateLimitRejections: Counter;
  /**
   * Chat turns a governance rule refused before anything was stored: `fhirgate.governance.rule` (`model_access`,
   * `patient_data`, `budget`), `fhirgate.project.id`, and for a budget `fhirgate.budget` (e.g. `project_day_tokens`).
   */
  readonly governanceRefusals: Counter;
  /** Turns about a patient sent de-identified to a model not cleared for patient data: `fhirgate.project.id`, `gen_ai.request.model`. */
  readonly deIdentifiedTurns: Counter;
  /** 1 while the host's Redis answers fhirgate's calls within their deadline, 0 while limits count in memory; observed only with a Redis. */
  readonly redisAvailable: ObservableGauge;
  /** Share of each project budget used (0 to 1 and beyond), as this instance sees it: `fhirgate.project.id`, `fhirgate.budget`. */
  readonly budgetUsage: ObservableGauge;
  /**
   * Exports what the meter and tracer providers hold now, when they can (an SDK's `forceFlush`), within
   * `FLUSH_DEADLINE_MS`: called when the plugin closes, because a Medplum server exports metrics every 60 s and
   * flushes nothing when it stops. Resolves false when a provider failed or missed the deadline.
   */
  flush(): Promise<boolean>;
}

/** How long closing the plugin waits for the telemetry's last export. */
export const FLUSH_DEADLINE_MS = 5_000;

/** Where the instruments come from: the globally registered providers unless given (as tests do). */
export interface TelemetryProviders {
  readonly meterProvider?: MeterProvider;
  readonly tracerProvider?: TracerProvider;
}

/** Makes the instruments (no-ops when no SDK is registered). */
export function createTelemetry(version: string, providers: TelemetryProviders = {}): Telemetry {
  const meterProvider = providers.meterProvider ?? metrics.getMeterProvider();
  const tracerProvider = providers.tracerProvider ?? trace.getTracerProvider();
  const meter = meterProvider.getMeter(TELEMETRY_SCOPE, version);
  const latency = { unit: 's', advice: { explicitBucketBoundaries: LATENCY_BUCKETS } };
  return {
    flush: () => flushProviders([meterProvider, tracerProvider instanceof ProxyTracerProvider ? tracerProvider.getDelegate() : tracerProvider]),
    tracer: tracerProvider.getTracer(TELEMETRY_SCOPE, version),
    requestDuration: meter.createHistogram('fhirgate.http.server.request.duration', {
      ...latency,
      description: 'Duration of the requests fhirgate served, streams to their last byte.',
    }),
    providerDuration: meter.createHistogram('fhirgate.llm.request.duration', {
      ...latency,
      description: 'Duration of LLM provider calls, to the last token.',
    }),
    timeToFirstToken: meter.createHistogram('fhirgate.llm.time_to_first_token', {
      ...latency,
      description: 'Time from a streamed provider call to its first text.',
    }),
    tokens: meter.createCounter('fhirgate.llm.tokens', { unit: '{token}', description: 'Tokens in and out, as the providers reported them.' }),
    cost: meter.createCounter('fhirgate.llm.cost', {
      unit: '{USD}',
      description: 'What chat turns cost in US dollars, by the prices of the models (governance.prices); unpriced models count nothing.',
    }),
    upstreamErrors: meter.createCounter('fhirgate.llm.upstream_errors', { description: 'Failed LLM provider calls, by kind.' }),
    activeStreams: meter.createUpDownCounter('fhirgate.chat.active_streams', { description: 'Chat completion streams open now.' }),
    repositoryOperations: meter.createCounter('fhirgate.chat.repository_operations', {
      description: 'FHIR repository reads, searches and writes chat turns asked of the server (each costs the server quota points and database round trips).',
    }),
    waitingTurns: meter.createUpDownCounter('fhirgate.chat.waiting_turns', {
      description: 'Chat turns waiting for a place among those being prepared (chatLimits.maxPreparingTurns).',
    }),
    deviceTokenExchanges: meter.createCounter('fhirgate.device.token_exchanges', {
      description: 'Device token exchanges, issued or refused (with the reason).',
    }),
    rateLimitRejections: meter.createCounter('fhirgate.rate_limit.rejections', { description: 'Requests refused by a rate limit.' }),
    governanceRefusals: meter.createCounter('fhirgate.governance.refusals', {
      description: 'Chat turns refused by a governance rule (model access, patient data, budgets) before anything was stored.',
    }),
    deIdentifiedTurns: meter.createCounter('fhirgate.governance.de_identified_turns', {
      description: 'Chat turns about a patient sent de-identified to a model not cleared for patient data.',
    }),
    redisAvailable: meter.createObservableGauge('fhirgate.redis.available', {
      description: "1 while the host's Redis answers within fhirgate's deadline; 0 while device limits count in this instance's memory.",
    }),
    budgetUsage: meter.createObservableGauge('fhirgate.budget.usage', {
      unit: '1',
      description: "Share of each project budget used in its current period, as this instance's view of the shared counters has it.",
    }),
  };
}

/** `forceFlush` of each provider that has one (the API's no-op providers have none), within the deadline. */
async function flushProviders(providers: readonly unknown[]): Promise<boolean> {
  const flushes = providers.flatMap((provider) => {
    const forceFlush = (provider as { forceFlush?: unknown } | undefined)?.forceFlush;
    return typeof forceFlush === 'function' ? [Promise.resolve(forceFlush.call(provider) as unknown)] : [];
  });
  if (flushes.length === 0) {
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), FLUSH_DEADLINE_MS);
    timer.unref();
  });
  try {
    return await Promise.race([Promise.all(flushes).then(() => true, () => false), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
