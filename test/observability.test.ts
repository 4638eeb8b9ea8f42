/**
 * What an operator sees of fhirgate: `/metrics` in Prometheus's text format after real chat and device traffic
 * (the openai SDK against a listening standalone host and the LLM emulator), the traces an OpenTelemetry SDK
 * receives, one log line per request carrying the id the client got in `X-Request-Id`, and `/healthcheck`.
 * No log line holds a key, a token or message text.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import type { Device } from '@medplum/fhirtypes';
import { Redis } from 'ioredis';
import OpenAI from 'openai';
import { createJsonLogger } from '../plugin/hosts/standalone/logger.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, TEST_METRICS_TOKEN, type TestHost } from './support/test-host.ts';

const PROVIDER_KEY = 'sk-observability-provider-key-0001';
const DEVICE_KEY = 'device-key-observability-0002';
const DEVICE_SECRET = 'observability-device-signing-secret-0123456789';
const SYSTEM = 'urn:example:devices';
const MODEL = 'emulator/echo';
const PROMPT = 'Summarise the discharge letter for Mrs Example';

const spans = new InMemorySpanExporter();
// As a Medplum server's OpenTelemetry set-up does: a context manager and a tracer provider for the process.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));

/** The value of the Prometheus sample `name{labels}` whose labels include all of `labels`; undefined if none. */
function sample(metricsText: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  const line = metricsText
    .split('\n')
    .find((candidate) => (candidate.startsWith(`${name}{`) || candidate.startsWith(`${name} `)) && wanted.every((pair) => candidate.includes(pair)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('observability of the standalone host', () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let openai: OpenAI;
  let accessToken: string;
  const logLines: string[] = [];

  beforeAll(async () => {
    process.env.FHIRGATE_TEST_OBSERVABILITY_SECRET = DEVICE_SECRET;
    emulator = await startLlmEmulator({ models: ['echo'] });
    host = await startTestHost({
      metrics: true,
      logger: createJsonLogger('info', (line) => logLines.push(line)),
      pluginFor: (seeded) => ({
        llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, apiKey: PROVIDER_KEY, models: ['echo'], retries: { maxRetries: 0 } } }, defaultModel: 'emulator/echo' },
        device_auth: {
          valid_keys: { 'monitor-1': DEVICE_KEY },
          jwt_secret: `env:FHIRGATE_TEST_OBSERVABILITY_SECRET`,
          identifier_system: SYSTEM,
          project_id: seeded.projectId,
          rate_limit_per_second: 3,
        },
      }),
    });
    project = host.project as SeededProject;
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'monitor-1' }] });
    accessToken = await host.accessTokenFor(project.ids['practitioner-membership']);
    openai = new OpenAI({ baseURL: `${host.url}v1`, apiKey: accessToken, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
  }, 60_000);

  afterAll(async () => {
    delete process.env.FHIRGATE_TEST_OBSERVABILITY_SECRET;
    await host?.close();
    await emulator?.close();
  });

  async function metrics(): Promise<string> {
    const response = await fetch(`${host.url}metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    return response.text();
  }

  async function exchange(apiKey: string): Promise<{ status: number; access?: string }> {
    const response = await fetch(`${host.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: 'monitor-1', api_key: apiKey }),
    });
    const body = (await response.json()) as { access?: string };
    return { status: response.status, access: body.access };
  }

  test('chat traffic shows up in /metrics: requests by route and status, provider latency, tokens by project and model, active streams', async () => {
    const before = await metrics();
    const chatRoute = { http_route: '/v1/chat/completions', http_response_status_code: '200' };
    const model = { gen_ai_provider_name: 'emulator', gen_ai_request_model: 'echo', fhirgate_project_id: project.projectId };
    const countBefore = sample(before, 'fhirgate_http_server_request_duration_count', chatRoute) ?? 0;
    const inputBefore = sample(before, 'fhirgate_llm_tokens_total', { ...model, gen_ai_token_type: 'input' }) ?? 0;
    const outputBefore = sample(before, 'fhirgate_llm_tokens_total', { ...model, gen_ai_token_type: 'output' }) ?? 0;

    const whole = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }] });
    emulator.enqueue({ replyTokens: 30, tokensPerSecond: 30 });
    const stream = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], stream: true, stream_options: { include_usage: true } });
    let streamUsage: OpenAI.CompletionUsage | undefined;
    let checkedOpenStream = false;
    for await (const chunk of stream) {
      if (!checkedOpenStream && chunk.choices[0]?.delta.content) {
        checkedOpenStream = true;
        expect(sample(await metrics(), 'fhirgate_chat_active_streams')).toBe(1);
      }
      streamUsage = chunk.usage ?? streamUsage;
    }

    const after = await metrics();
    expect(sample(after, 'fhirgate_http_server_request_duration_count', chatRoute)).toBe(countBefore + 2);
    expect(sample(after, 'fhirgate_llm_tokens_total', { ...model, gen_ai_token_type: 'input' })).toBe(
      inputBefore + (whole.usage?.prompt_tokens ?? NaN) + (streamUsage?.prompt_tokens ?? NaN)
    );
    expect(sample(after, 'fhirgate_llm_tokens_total', { ...model, gen_ai_token_type: 'output' })).toBe(
      outputBefore + (whole.usage?.completion_tokens ?? NaN) + (streamUsage?.completion_tokens ?? NaN)
    );
    expect(sample(after, 'fhirgate_llm_request_duration_count', model)).toBeGreaterThanOrEqual(2);
    expect(sample(after, 'fhirgate_llm_time_to_first_token_count', model)).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'fhirgate_chat_active_streams')).toBe(0);
    expect(sample(after, 'fhirgate_chat_waiting_turns')).toBe(0);
  });

  test('a JSON reply being generated is not an open stream: the active-streams gauge counts streams only', async () => {
    emulator.enqueue({ replyTokens: 30, tokensPerSecond: 30 });
    const receivedBefore = emulator.received.length;
    const whole = openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }] });
    while (emulator.received.length === receivedBefore) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(sample(await metrics(), 'fhirgate_chat_active_streams')).toBe(0);
    expect((await whole).choices[0].message.content).toMatch(/^token1 /);
    expect(sample(await metrics(), 'fhirgate_chat_active_streams')).toBe(0);
  });

  test("a chat request's FHIR reads, searches and writes are on its log line and counted in /metrics by operation", async () => {
    const first = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }] });
    const conversationId = (first as unknown as { conversation_id: string }).conversation_id;
    const operation = (name: string, text: string): number => sample(text, 'fhirgate_chat_repository_operations_total', { fhirgate_operation: name }) ?? 0;
    const before = await metrics();
    const { response } = await openai.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'And the medication list?' }], conversation_id: conversationId } as never)
      .withResponse();
    const requestId = response.headers.get('x-request-id');
    const line = logLines.map((text) => JSON.parse(text) as Record<string, unknown>).find((entry) => entry.requestId === requestId);
    const counts = { read: line?.fhirReads, search: line?.fhirSearches, write: line?.fhirWrites };
    for (const count of Object.values(counts)) {
      expect(count).toBeGreaterThan(0);
    }
    const after = await metrics();
    for (const [name, count] of Object.entries(counts)) {
      expect(operation(name, after) - operation(name, before)).toBe(count);
    }
  });

  test('/metrics (it names projects and models) is served only to the configured bearer token', async () => {
    await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Count me' }] });
    for (const headers of [{}, { Authorization: 'Bearer wrong-metrics-token-0123456789' }, { Authorization: `Bearer ${accessToken}` }, { Authorization: `Basic ${Buffer.from(`x:${TEST_METRICS_TOKEN}`).toString('base64')}` }]) {
      const response = await fetch(`${host.url}metrics`, { headers });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
      const text = await response.text();
      expect(text).not.toContain('fhirgate_');
      expect(text).not.toContain(project.projectId);
    }
    expect(await metrics()).toContain(project.projectId);
  });

  test('an upstream failure is counted by kind, and the request by its 500', async () => {
    emulator.enqueue({ errorStatus: 500 });
    await expect(openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hello' }] })).rejects.toMatchObject({ status: 500 });
    const text = await metrics();
    expect(sample(text, 'fhirgate_llm_upstream_errors_total', { gen_ai_provider_name: 'emulator', error_type: 'http_status' })).toBe(1);
    expect(sample(text, 'fhirgate_http_server_request_duration_count', { http_route: '/v1/chat/completions', http_response_status_code: '500' })).toBe(1);
  });

  test('a stalled event loop shows in /metrics, for the interval since the previous scrape', async () => {
    await metrics();
    // Holds the host's event loop (it runs in this process) as a synchronous step of a request would.
    await new Promise<void>((resolve) =>
      setTimeout(() => {
        const until = performance.now() + 120;
        while (performance.now() < until) {
          // the stall is the point
        }
        resolve();
      }, 30)
    );
    await new Promise((resolve) => setTimeout(resolve, 40));
    const text = await metrics();
    expect(sample(text, 'fhirgate_host_event_loop_delay_max')).toBeGreaterThanOrEqual(0.1);
    expect(sample(text, 'fhirgate_host_event_loop_delay_p99')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'fhirgate_host_event_loop_delay_p50')).toBeGreaterThanOrEqual(0);
  });

  test('device token issuances, refusals by reason and rate-limit rejections are counted', async () => {
    expect((await exchange(DEVICE_KEY)).status).toBe(200);
    expect((await exchange('not-the-key')).status).toBe(403);
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 4; attempt += 1) {
      statuses.push((await exchange(DEVICE_KEY)).status);
    }
    const rejected = statuses.filter((status) => status === 429).length;
    expect(rejected).toBeGreaterThan(0);

    const text = await metrics();
    expect(sample(text, 'fhirgate_device_token_exchanges_total', { fhirgate_outcome: 'issued' })).toBe(1 + statuses.filter((status) => status === 200).length);
    expect(sample(text, 'fhirgate_device_token_exchanges_total', { fhirgate_outcome: 'refused', fhirgate_reason: 'wrong_key' })).toBe(1);
    expect(sample(text, 'fhirgate_device_token_exchanges_total', { fhirgate_outcome: 'refused', fhirgate_reason: 'rate_limited' })).toBe(rejected);
    expect(sample(text, 'fhirgate_rate_limit_rejections_total', { fhirgate_limit: 'device' })).toBe(rejected);
  });

  test('a chat request is one span with the provider call as its child, carrying GenAI attributes and no text', async () => {
    spans.reset();
    const { data, response } = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    const requestId = response.headers.get('x-request-id');

    const finished = spans.getFinishedSpans();
    const requestSpan = finished.find((span) => span.name === 'POST /v1/chat/completions');
    const providerSpan = finished.find((span) => span.name === 'chat echo');
    expect(requestSpan?.attributes).toMatchObject({
      'http.route': '/v1/chat/completions',
      'http.response.status_code': 200,
      'fhirgate.request_id': requestId,
      projectId: project.projectId,
      replyId: (data as unknown as { communication_id: string }).communication_id,
    });
    expect(providerSpan?.parentSpanContext?.spanId).toBe(requestSpan?.spanContext().spanId);
    expect(providerSpan?.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'emulator',
      'gen_ai.usage.input_tokens': data.usage?.prompt_tokens,
      'gen_ai.usage.output_tokens': data.usage?.completion_tokens,
    });
    expect(JSON.stringify(finished.map((span) => span.attributes))).not.toContain('discharge letter');
  });

  test('every request logs one line with the id the client got; no line holds a key, a token or message text', async () => {
    const { data, response } = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    const requestId = response.headers.get('x-request-id');
    const entries = logLines.map((line) => JSON.parse(line) as Record<string, unknown>);
    // The line names the turn's records: its conversation, prompt and reply.
    const { conversation_id: conversationId, communication_id: replyId } = data as unknown as { conversation_id: string; communication_id: string };
    expect(entries).toContainEqual(
      expect.objectContaining({ level: 'INFO', msg: 'fhirgate request', requestId, route: '/v1/chat/completions', status: 200, projectId: project.projectId, conversationId, promptId: expect.any(String), replyId })
    );

    // A new rate-limit window, so the exchange issues a token whatever the tests before did.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const { access } = await exchange(DEVICE_KEY);
    expect(access).toEqual(expect.any(String));
    const everything = logLines.join('\n');
    for (const secret of [PROVIDER_KEY, DEVICE_KEY, DEVICE_SECRET, accessToken, access ?? 'no-device-token', PROMPT, 'discharge letter', 'Echo:']) {
      expect(everything).not.toContain(secret);
    }
  });

  test('/healthcheck answers like Medplum: ok, version, the store; 503 when Redis does not answer', async () => {
    const healthy = await fetch(`${host.url}healthcheck`);
    expect(healthy.status).toBe(200);
    expect(await healthy.json()).toEqual({ ok: true, version: expect.any(String), platform: process.platform, runtime: process.version, store: true });

    const deadRedis = new Redis({ host: '127.0.0.1', port: 1, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    const { createHealthcheck } = await import('../plugin/hosts/standalone/healthcheck.ts');
    const express = (await import('express')).default;
    const app = express();
    app.get('/healthcheck', createHealthcheck(host.store, deadRedis));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const address = server.address() as { port: number };
      const unhealthy = await fetch(`http://127.0.0.1:${address.port}/healthcheck`);
      expect(unhealthy.status).toBe(503);
      expect(await unhealthy.json()).toMatchObject({ ok: false, store: true, redis: false });
    } finally {
      server.close();
      deadRedis.disconnect();
    }
  });
});
