/**
 * What fhirgate itself exports to an operator's telemetry never holds message text, a key, a token or a patient's
 * identifiers: a turn about a patient, a device token exchange, a device's GraphQL call and an MCP search for the
 * patient by name with the project's API key, through a listening
 * standalone host, with the process's OpenTelemetry SDK in memory (spans, metrics exported as a 60-second periodic
 * reader would, log lines). Everything exported is searched for each of them. Closing the host flushes the metrics:
 * a Medplum server exports every 60 s and flushes nothing when it stops, so fhirgate does it itself.
 */
import { context, trace, metrics } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Device, Patient, Project } from '@medplum/fhirtypes';
import { createJsonLogger } from '../plugin/hosts/standalone/logger.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { connectMcp, textOf } from './support/mcp-test-client.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

const PROVIDER_KEY = 'sk-telemetry-privacy-provider-key-7731';
const DEVICE_KEY = 'device-key-telemetry-privacy-5519';
const DEVICE_SECRET = 'telemetry-privacy-device-signing-secret-0123456789';
const SYSTEM = 'urn:example:devices';
const PROMPT = 'Is the rising creatinine of my patient worrying given her lisinopril dose';

// As a Medplum server's NodeSDK does, before the plugin is created: a context manager, a tracer provider and a
// meter provider whose reader exports every 60 s (as Medplum's does, in deltas).
const spanExporter = new InMemorySpanExporter();
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.DELTA);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] }));
const meterProvider = new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 })] });
metrics.setGlobalMeterProvider(meterProvider);

describe("fhirgate's own telemetry", () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let patient: Patient;
  let closed = false;
  const logLines: string[] = [];

  beforeAll(async () => {
    process.env.FHIRGATE_TEST_PRIVACY_SECRET = DEVICE_SECRET;
    emulator = await startLlmEmulator({ models: ['echo'] });
    host = await startTestHost({
      logger: createJsonLogger('debug', (line) => logLines.push(line)),
      pluginFor: (seeded) => ({
        llm: {
          providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, apiKey: PROVIDER_KEY, models: ['echo'], retries: { maxRetries: 0 } } },
          defaultModel: 'emulator/echo',
          patientDataModels: ['emulator/*'],
        },
        device_auth: { valid_keys: { 'monitor-7': DEVICE_KEY }, jwt_secret: 'env:FHIRGATE_TEST_PRIVACY_SECRET', identifier_system: SYSTEM, project_id: seeded.projectId },
      }),
    });
    project = host.project as SeededProject;
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'monitor-7' }] });
    patient = await repo.readResource<Patient>('Patient', project.ids['patient-in-care-team-1']);
    // MCP clients get the patient's records as they are.
    const settings = await host.store.readResource<Project>('Project', project.projectId);
    await host.store.updateResource<Project>({ ...settings, setting: [...(settings.setting ?? []), { name: 'AI_MCP_PATIENT_DATA', valueString: 'allow' }] });
  }, 60_000);

  afterAll(async () => {
    delete process.env.FHIRGATE_TEST_PRIVACY_SECRET;
    if (!closed) {
      await host?.close();
    }
    await emulator?.close();
    await meterProvider.shutdown();
  });

  test('spans, metrics and log lines of a patient turn, a device token exchange, a device GraphQL call and an MCP search hold no text, key, token or patient identifier', async () => {
    const accessToken = await host.accessTokenFor(project.ids['practitioner-membership']);
    const chat = await fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${accessToken}`, 'X-Project-ID': project.projectId },
      body: JSON.stringify({ model: 'emulator/echo', messages: [{ role: 'user', content: PROMPT }], patient_id: patient.id }),
    });
    expect(chat.status).toBe(200);
    const reply = ((await chat.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content;
    expect(reply.length).toBeGreaterThan(20);
    // The model was given the chart: the patient's name was in what the provider received, so it was in reach.
    expect(JSON.stringify(emulator.received[0].messages)).toContain(patient.name?.[0].family);

    const exchange = await fetch(`${host.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: 'monitor-7', api_key: DEVICE_KEY }),
    });
    expect(exchange.status).toBe(200);
    const deviceToken = ((await exchange.json()) as { access: string }).access;

    const graphql = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${deviceToken}` },
      body: JSON.stringify({ query: '{ DeviceList(_count: 5) { id status } }' }),
    });
    expect(graphql.status).toBe(200);
    expect(((await graphql.json()) as { data?: { DeviceList?: unknown[] } }).data?.DeviceList).toHaveLength(1);

    // The MCP server, with the project's API key (`<client id>:<secret>`), searching for the patient by name.
    const mcp = await connectMcp(host, project, { clientKey: true });
    const search = await mcp.call('find_patients', { name: patient.name?.[0].family ?? '' });
    expect(search.isError).toBeFalsy();
    expect(textOf(search)).toContain(patient.id);
    await mcp.close();

    // Closing flushes the metrics the 60-second reader has not exported yet.
    await host.close();
    closed = true;
    const spans = spanExporter.getFinishedSpans();
    const exportedMetrics = metricExporter.getMetrics();

    // What was exported, so the search below searches something.
    expect(spans.map((span) => span.name)).toEqual(expect.arrayContaining(['POST /v1/chat/completions', 'chat echo', 'POST /account/api/token/device/', 'POST /graphql', 'POST /mcp']));
    const metricNames = exportedMetrics.flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics.map((metric) => metric.descriptor.name)));
    expect(metricNames).toEqual(expect.arrayContaining(['fhirgate.http.server.request.duration', 'fhirgate.llm.tokens', 'fhirgate.device.token_exchanges']));
    expect(logLines.some((line) => line.includes('"fhirgate request"'))).toBe(true);

    const exported = [
      JSON.stringify(
        spans.map((span) => ({ name: span.name, attributes: span.attributes, events: span.events.map((event) => ({ name: event.name, attributes: event.attributes })), status: span.status, links: span.links }))
      ),
      JSON.stringify(exportedMetrics.flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics.map((metric) => ({ descriptor: metric.descriptor, points: metric.dataPoints.map((point) => point.attributes) }))))),
      logLines.join('\n'),
    ].join('\n');
    const forbidden = {
      prompt: PROMPT,
      'a phrase of the prompt': 'rising creatinine',
      reply: reply.slice(0, 40),
      'the provider key': PROVIDER_KEY,
      "the project's API key": project.client?.secret ?? 'no client secret',
      'the device key': DEVICE_KEY,
      'the signing secret': DEVICE_SECRET,
      "the user's access token": accessToken,
      "the device's token": deviceToken,
      "the patient's id": patient.id ?? 'no id',
      "the patient's family name": patient.name?.[0].family ?? 'no family name',
      "the patient's given name": patient.name?.[0].given?.[0] ?? 'no given name',
      "the patient's birth date": patient.birthDate ?? 'no birth date',
    };
    const found = Object.entries(forbidden).filter(([, value]) => exported.includes(value)).map(([what]) => what);
    expect(found).toEqual([]);
  }, 60_000);
});
