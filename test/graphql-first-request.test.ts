/**
 * A device's first `/graphql` on a host just started: the spec's `ObservationCreate` is answered and stored from
 * the host's partial engine, while chat turns are answered alongside, and Medplum's `$graphql` handler, which
 * builds Medplum's whole GraphQL schema on its first request (seconds, ~500 MB), is never asked. A document
 * beyond Observations (a user reading a Patient) is still Medplum's handler's, and answered as Medplum answers it.
 */
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { FhirRouter, type FhirRequest } from '@medplum/fhir-router';
import type { Device, Observation } from '@medplum/fhirtypes';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
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

  test("a document beyond Observations goes to Medplum's handler, which answers it", async () => {
    const practitioner = await host.accessTokenFor(project.ids['practitioner-membership']);
    const patientId = project.ids['patient-in-care-team-1'];
    const response = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${practitioner}`, 'X-Project-ID': project.projectId },
      body: JSON.stringify({ query: `{ Patient(id: "${patientId}") { id } }` }),
    });

    expect(await response.json()).toEqual({ data: { Patient: { id: patientId } } });
    expect(medplumGraphql).toContain(`{ Patient(id: "${patientId}") { id } }`);
  }, 120_000);
});
