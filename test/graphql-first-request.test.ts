/**
 * A device's first `/graphql` on a host just started: the spec's `ObservationCreate` is answered and stored from
 * the host's partial engine, while chat turns are answered alongside, and Medplum's `$graphql` handler, which
 * builds Medplum's whole GraphQL schema on its first request (seconds, ~500 MB), is never asked. A document
 * beyond Observations (a user reading a Patient) is still Medplum's handler's, answered as Medplum answers it, in
 * the host's GraphQL worker: the host's own thread never builds the whole schema, and chat answers meanwhile. A
 * device's document beyond its Observations and its Device is refused before any schema is built.
 */
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { FhirRouter, type FhirRequest } from '@medplum/fhir-router';
import type { Device, Observation } from '@medplum/fhirtypes';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { WorkerGraphqlEngine } from '../plugin/hosts/standalone/off-thread-graphql.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';

const SYSTEM = 'urn:example:first-request';
const KEY = 'first-request-key-aaaa-Lq7Vx2Nc9Rk';
const SPEC_MUTATION =
  'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { coding { system code } } device { identifier { system value } } } }';

describe('the first /graphql of a freshly started host', () => {
  const medplumGraphql: string[] = [];
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let monitor: Device;

  beforeAll(async () => {
    // Every `$graphql` request that reaches the host's own FhirRouter (Medplum's handler and its whole schema).
    const handleRequest = FhirRouter.prototype.handleRequest;
    jest.spyOn(FhirRouter.prototype, 'handleRequest').mockImplementation(function (this: FhirRouter, request: FhirRequest, repo) {
      if (request.url.includes('$graphql')) medplumGraphql.push(String((request.body as { query?: unknown }).query));
      return handleRequest.call(this, request, repo);
    });
    emulator = await startLlmEmulator();
    host = await startTestHost({
      pluginFor: (seeded) => ({
        llm: { providers: { openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'] } }, defaultModel: 'openai/gpt-4o-mini' },
        device_auth: { valid_keys: { 'monitor-1': KEY }, jwt_secret: 'first-request-device-signing-secret-0123456789', identifier_system: SYSTEM, project_id: seeded.projectId },
      }),
    });
    project = host.project as SeededProject;
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    monitor = await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'monitor-1' }] });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
    jest.restoreAllMocks();
  });

  function graphqlWorker(): WorkerGraphqlEngine {
    const engine = host.standalone.host.fhir.offThreadGraphql;
    if (!(engine instanceof WorkerGraphqlEngine)) throw new Error('the standalone host runs no GraphQL worker');
    return engine;
  }

  async function chatTurn(token: string): Promise<{ status: number; content: unknown }> {
    const response = await fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'How was the night?' }] }),
    });
    const body = (await response.json()) as { choices?: { message?: { content?: unknown } }[] };
    return { status: response.status, content: body.choices?.[0]?.message?.content };
  }

  test("the spec's ObservationCreate is answered and stored without Medplum's whole schema, chat answering alongside", async () => {
    const exchange = await fetch(`${host.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: 'monitor-1', api_key: KEY }),
    });
    const { access } = (await exchange.json()) as { access: string };
    const practitioner = await host.accessTokenFor(project.ids['practitioner-membership']);
    const input = { status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] }, device: { identifier: { system: SYSTEM, value: 'monitor-1' } } };

    const [graphql, ...chat] = await Promise.all([
      fetch(`${host.url}graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` },
        body: JSON.stringify({ query: SPEC_MUTATION, variables: { input } }),
      }),
      chatTurn(practitioner),
      chatTurn(practitioner),
    ]);

    expect(graphql.status).toBe(200);
    const answer = (await graphql.json()) as { data?: { ObservationCreate?: { id: string } }; errors?: unknown };
    expect(answer.errors).toBeUndefined();
    expect(answer.data?.ObservationCreate).toEqual({
      id: expect.any(String),
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      device: { identifier: { system: SYSTEM, value: 'monitor-1' } },
    });
    const stored = await host.store.readResource<Observation>('Observation', answer.data?.ObservationCreate?.id ?? '');
    expect(stored.device).toEqual({ reference: `Device/${monitor.id}`, identifier: { system: SYSTEM, value: 'monitor-1' } });
    expect(stored.meta?.author?.reference).toBe(`Device/${monitor.id}`);
    for (const turn of chat) {
      expect(turn.status).toBe(200);
      expect(turn.content).toEqual(expect.any(String));
    }
    expect(medplumGraphql).toEqual([]);
  });

  test("a device's document beyond its Observations and its Device is FORBIDDEN before any schema is built", async () => {
    const exchange = await fetch(`${host.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: 'monitor-1', api_key: KEY }),
    });
    const { access } = (await exchange.json()) as { access: string };
    for (const query of ['{ PatientList { id } }', '{ ObservationList { subject { resource { ... on Patient { id } } } } }', '{ ObservationList { id } Foo: PractitionerList { id } }']) {
      const response = await fetch(`${host.url}graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` },
        body: JSON.stringify({ query }),
      });
      const body = (await response.json()) as { data?: unknown; errors?: { message: string; extensions: { code: string } }[] };
      expect(body.data).toBeUndefined();
      expect(body.errors?.map((error) => error.extensions.code)).toEqual(['FORBIDDEN']);
      expect(body.errors?.[0].message).toMatch(/^A device may only read and write its Observations and read its own Device; /);
    }
    expect(medplumGraphql).toEqual([]);
    expect(graphqlWorker().running).toBe(false);
  });

  test("a user's document beyond Observations is answered by Medplum's handler in the GraphQL worker, chat answering alongside", async () => {
    const practitioner = await host.accessTokenFor(project.ids['practitioner-membership']);
    const patientId = project.ids['patient-in-care-team-1'];
    const [response, ...chat] = await Promise.all([
      fetch(`${host.url}graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${practitioner}`, 'X-Project-ID': project.projectId },
        body: JSON.stringify({ query: `{ Patient(id: "${patientId}") { id } }` }),
      }),
      chatTurn(practitioner),
      chatTurn(practitioner),
    ]);

    expect(await response.json()).toEqual({ data: { Patient: { id: patientId } } });
    for (const turn of chat) {
      expect(turn.status).toBe(200);
    }
    // Not the host's own engine: its thread never built Medplum's whole schema.
    expect(medplumGraphql).toEqual([]);
    expect(graphqlWorker().running).toBe(true);

    // A read the user's AccessPolicy refuses, and a document Medplum does not validate: Medplum's answers, as in-process.
    const missing = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${practitioner}`, 'X-Project-ID': project.projectId },
      body: JSON.stringify({ query: '{ Patient(id: "no-such-patient") { id } }' }),
    });
    expect(await missing.json()).toEqual({ data: { Patient: null }, errors: [{ message: 'Not found', locations: [{ line: 1, column: 3 }], path: ['Patient'], extensions: { code: 'NOT_FOUND' } }] });
    const invalid = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${practitioner}`, 'X-Project-ID': project.projectId },
      body: JSON.stringify({ query: '{ PatientList { nickname } }' }),
    });
    expect(await invalid.json()).toEqual({ errors: [{ message: 'Cannot query field "nickname" on type "Patient". Did you mean "name"?', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] });
  }, 120_000);

  test("Medplum's own /fhir/R4/$graphql runs in the GraphQL worker too, answering as Medplum's route does", async () => {
    const practitioner = await host.accessTokenFor(project.ids['practitioner-membership']);
    const post = (body: unknown) =>
      fetch(`${host.url}fhir/R4/$graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${practitioner}`, 'X-Project-ID': project.projectId },
        body: JSON.stringify(body),
      });
    const patients = await post({ query: '{ PatientList { id } }' });
    expect(patients.status).toBe(200);
    const listed = ((await patients.json()) as { data: { PatientList: { id: string }[] } }).data.PatientList.map((patient) => patient.id).sort();
    expect(listed).toEqual([project.ids['patient-in-care-team-1'], project.ids['patient-in-care-team-2']].sort());
    const invalid = await post({ query: '{ PatientList { nickname } }' });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { resourceType: string }).resourceType).toBe('OperationOutcome');
    expect((await post({})).status).toBe(400);
    expect(medplumGraphql).toEqual([]);
  }, 120_000);
});
