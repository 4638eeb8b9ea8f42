/**
 * The MCP server (plugin/mcp/): the SDK's own client, over Streamable HTTP, signed in as the demo practitioner.
 * The tools answer under her AccessPolicy as the chat's do, a patient outside her care team is a tool error, every
 * result with records writes the disclosure's AuditEvent naming the MCP client, the project's rule for MCP clients
 * refuses by default, and without a token the endpoint answers 401 pointing at its protected-resource metadata.
 */
import { rm } from 'node:fs/promises';
import { MedplumClient } from '@medplum/core';
import request from 'supertest';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AuditEvent, Project } from '@medplum/fhirtypes';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { MCP_PATIENT_DATA_SETTING } from '../plugin/mcp/mcp-patient-data.ts';
import { seedChart, type SeededChart } from './support/seeded-chart.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

type ToolAnswer = { readonly isError?: boolean; readonly content: readonly { readonly type: string; readonly text?: string }[] };

describe('MCP server', () => {
  let host: TestHost;
  let project: SeededProject;
  let chart: SeededChart;
  let medplum: MedplumClient;
  // Connected at a test's first call, after its project's settings are set (the host keeps a token's project for a while).
  let client: Client | undefined;

  beforeAll(async () => {
    host = await startTestHost();
  });
  afterAll(() => host.close());
  beforeEach(async () => {
    project = await host.seedProject();
    const system = await host.standalone.host.getSystemRepo(project.projectId);
    chart = await seedChart(system, project);
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
    client = undefined;
  });
  afterEach(() => client?.close());

  const setRule = async (value: string | undefined): Promise<void> => {
    const stored = await host.store.readResource<Project>('Project', project.projectId);
    const setting = (stored.setting ?? []).filter((entry) => entry.name !== MCP_PATIENT_DATA_SETTING);
    await host.store.updateResource<Project>({ ...stored, setting: value === undefined ? setting : [...setting, { name: MCP_PATIENT_DATA_SETTING, valueString: value }] });
  };
  const connect = async (path: string, era: 'auto' | 'legacy' = 'auto'): Promise<Client> => {
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const transport = new StreamableHTTPClientTransport(new URL(`${host.url}${path}`), { requestInit: { headers: { Authorization: `Bearer ${token}`, ...(path === 'mcp' ? { 'X-Project-ID': project.projectId } : {}) } } });
    const connected = new Client({ name: 'mcp-test-client', version: '1.2.3' }, { versionNegotiation: { mode: era } });
    await connected.connect(transport);
    return connected;
  };
  const mcp = async (): Promise<Client> => (client ??= await connect(`projects/${project.projectId}/mcp`));
  const call = async (name: string, args: Record<string, unknown>): Promise<ToolAnswer> => (await (await mcp()).callTool({ name, arguments: args })) as ToolAnswer;
  const textOf = (answer: ToolAnswer): string => answer.content.map((part) => part.text ?? '').join('');
  const auditsOf = (patientId: string): Promise<AuditEvent[]> =>
    medplum.searchResources('AuditEvent', { entity: `Patient/${patientId}`, _sort: 'date' }, { cache: 'no-cache' });

  test('lists the chat’s FHIR tools and find_patients, each taking the patient it is about', async () => {
    const { tools } = await (await mcp()).listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['find_patients', 'get_patient_summary', 'read_record', 'search_patient_records']);
    const search = tools.find((tool) => tool.name === 'search_patient_records');
    expect(search?.inputSchema).toMatchObject({ required: ['patient_id', 'resource_type'], properties: { resource_type: { enum: expect.arrayContaining(['Observation', 'Condition']) } } });
  });

  test('refuses patient data by default: the project has not allowed MCP clients', async () => {
    const answer = await call('find_patients', { name: 'Lopez' });
    expect(answer.isError).toBe(true);
    expect(textOf(answer)).toContain(MCP_PATIENT_DATA_SETTING);
    expect(await auditsOf(project.ids['patient-in-care-team-1'])).toHaveLength(0);
  });

  describe('where the project allows MCP clients', () => {
    beforeEach(() => setRule('allow'));

    test('each tool answers as the practitioner may read, and each disclosure is on record naming the MCP client', async () => {
      const patientId = project.ids['patient-in-care-team-1'];
      const found = JSON.parse(textOf(await call('find_patients', { name: 'Lopez' }))) as { patients: { id: string; birthDate: string }[] };
      expect(found.patients).toEqual([expect.objectContaining({ id: patientId, birthDate: '1958-03-14' })]);

      const searched = await call('search_patient_records', { patient_id: patientId, resource_type: 'Observation', params: { code: 'http://loinc.org|8867-4' } });
      expect(searched.isError).toBeUndefined();
      expect((JSON.parse(textOf(searched)) as { records: { id: string }[] }).records.map((record) => record.id)).toEqual([chart.pulse.id]);

      const read = await call('read_record', { patient_id: patientId, reference: `Condition/${chart.condition.id}` });
      expect(textOf(read)).toContain('Essential hypertension');
      // Another patient's record, named under this patient: not given.
      const elsewhere = await call('read_record', { patient_id: patientId, reference: `Condition/${chart.elsewhere.id}` });
      expect(elsewhere.isError).toBe(true);

      const audits = await auditsOf(patientId);
      expect(audits).toHaveLength(3);
      for (const audit of audits) {
        expect(audit.agent[0]).toMatchObject({ who: { reference: `Practitioner/${project.ids.practitioner}` }, requestor: true });
        expect(audit.agent[1]).toMatchObject({ who: { display: 'MCP client: mcp-test-client 1.2.3' }, requestor: false });
        expect(audit.entity?.some((entity) => entity.what?.reference?.startsWith('Communication/'))).toBe(false);
      }
      const domain = audits.flatMap((audit) => (audit.entity ?? []).filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference));
      expect(domain).toEqual([`Observation/${chart.pulse.id}`, `Condition/${chart.condition.id}`]);
      // A reviewer finds every disclosure to one client by its name.
      const toClient = await medplum.searchResources('AuditEvent', { 'agent-name': 'mcp-test-client', entity: `Patient/${patientId}` }, { cache: 'no-cache' });
      expect(toClient.map((audit) => audit.id).sort()).toEqual(audits.map((audit) => audit.id).sort());
    });

    test('at /mcp with X-Project-ID, a 2025 client is recorded by the name it declared at initialize (its session keeps it)', async () => {
      client = await connect('mcp', 'legacy');
      const patientId = project.ids['patient-in-care-team-1'];
      const read = await call('read_record', { patient_id: patientId, reference: `Condition/${chart.condition.id}` });
      expect(read.isError).toBeUndefined();
      const [audit] = await auditsOf(patientId);
      expect(audit.agent[1].who?.display).toBe('MCP client: mcp-test-client 1.2.3');
    });

    test('a patient outside her care team is a tool error saying why, and nothing is disclosed', async () => {
      const outside = project.ids['patient-outside-care-team'];
      const answer = await call('search_patient_records', { patient_id: outside, resource_type: 'Condition' });
      expect(answer.isError).toBe(true);
      expect(textOf(answer)).toContain('not a patient the requesting user may see');
      const found = JSON.parse(textOf(await call('find_patients', { name: 'Okafor' }))) as { count: number };
      expect(found.count).toBe(0);
      expect(await auditsOf(outside)).toHaveLength(0);
    });

    test('bad input is a tool error saying what to give, never a stack trace', async () => {
      const empty = await call('find_patients', {});
      expect(empty).toMatchObject({ isError: true });
      expect(textOf(empty)).toBe('Give at least one of name, birthdate or identifier.');
      const badDate = await call('find_patients', { birthdate: 'last spring' });
      expect(badDate.isError).toBe(true);
      expect(textOf(badDate)).toMatch(/^The search was not accepted/);
      const badType = await call('search_patient_records', { patient_id: project.ids['patient-in-care-team-1'], resource_type: 'Encounter' });
      expect(badType.isError).toBe(true);
      expect(textOf(badType)).toMatch(/resource_type must be equal to one of the allowed values/);
    });
  });

  test("a ClientApplication's API key is a credential too, as on /v1", async () => {
    const key = `${project.client?.id ?? ''}:${project.client?.secret ?? ''}`;
    const transport = new StreamableHTTPClientTransport(new URL(`${host.url}projects/${project.projectId}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
    const keyed = new Client({ name: 'mcp-key-client', version: '0.1.0' }, { versionNegotiation: { mode: 'auto' } });
    await keyed.connect(transport);
    try {
      expect((await keyed.listTools()).tools.map((tool) => tool.name)).toContain('find_patients');
    } finally {
      await keyed.close();
    }
    const wrong = await fetch(`${host.url}projects/${project.projectId}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${project.client?.id ?? ''}:not-the-secret`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(wrong.status).toBe(401);
  });

  test.each(['GET', 'DELETE'])('%s without a session id is 405: no server-initiated stream, no session to end', async (method) => {
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const response = await fetch(`${host.url}projects/${project.projectId}/mcp`, { method, headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' } });
    expect(response.status).toBe(405);
    expect(response.headers.get('content-type') ?? '').not.toMatch(/html/);
  });

  test('without a token: 401 with the challenge, and the metadata names the Medplum server', async () => {
    const response = await fetch(`${host.url}mcp`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(response.status).toBe(401);
    const challenge = response.headers.get('www-authenticate') ?? '';
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1] ?? '';
    expect(metadataUrl).toBe(`${host.url}.well-known/oauth-protected-resource/mcp`);
    const body = (await response.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/access token/);
    expect(JSON.stringify(body)).not.toMatch(/at .*\.ts/);
    const metadata = (await (await fetch(metadataUrl)).json()) as { resource: string; authorization_servers: string[] };
    // `openid`: a Medplum server refuses an authorization request without a scope, and clients send what is named.
    expect(metadata).toEqual(expect.objectContaining({ resource: `${host.url}mcp`, authorization_servers: [host.url], scopes_supported: ['openid'] }));
  });

  test('signed in through OAuth, a client sends its token and nothing else: /mcp acts in the credential’s own project', async () => {
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const transport = new StreamableHTTPClientTransport(new URL(`${host.url}mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
    const bare = new Client({ name: 'oauth-editor', version: '2.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await bare.connect(transport);
    try {
      const refused = (await bare.callTool({ name: 'find_patients', arguments: { name: 'Lopez' } })) as ToolAnswer;
      // The project's own rule answers (patient data not allowed here), so the request acted in her project.
      expect(textOf(refused)).toContain('AI_MCP_PATIENT_DATA');
    } finally {
      await bare.close();
    }
  });
});

describe('MCP metadata in a Medplum server', () => {
  test("names the server's issuer as the authorization server when the mount passes it, whatever host name the client used", async () => {
    const host = await startTestHost({ plugin: { mcpAuthorizationServer: 'https://medplum.example.org/' } });
    try {
      const url = host.url.replace('127.0.0.1', 'localhost');
      const metadata = (await (await fetch(`${url}.well-known/oauth-protected-resource/mcp`)).json()) as { resource: string; authorization_servers: string[] };
      expect(metadata).toEqual(expect.objectContaining({ resource: `${url}mcp`, authorization_servers: ['https://medplum.example.org/'] }));
    } finally {
      await host.close();
    }
  });
});

describe('MCP server while fhirgate closes', () => {
  test('a request is 503 in the MCP error shape, with Retry-After', async () => {
    const host = await startTestHost();
    try {
      const project = await host.seedProject();
      const token = await host.accessTokenFor(project.ids['practitioner-membership']);
      await host.standalone.close({ graceMs: 0 });
      const refused = await request(host.standalone.app)
        .post(`/projects/${project.projectId}/mcp`)
        .set('Authorization', `Bearer ${token}`)
        .send({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
        .expect(503);
      expect(refused.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { message: expect.stringContaining('shutting down'), data: { code: 'unavailable' } } });
      expect(refused.headers['retry-after']).toBe('1');
    } finally {
      await host.store.close();
      await rm(host.dataDir, { recursive: true, force: true });
    }
  });
});

describe('MCP server, requests per caller', () => {
  test('beyond chatLimits.maxConcurrentTurns running at once, a request is 429 with Retry-After; once one ends, the next is served', async () => {
    // The store holds the read of one Patient until the test lets it go: one request stays running, without timing.
    let held = '';
    let entered: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => (entered = resolve));
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holding = (store: FhirRepository): FhirRepository =>
      new Proxy(store, {
        get(target, property, receiver) {
          const value: unknown = Reflect.get(target, property, receiver);
          if (property !== 'readResource' || typeof value !== 'function') {
            return typeof value === 'function' ? value.bind(target) : value;
          }
          return async (type: string, id: string, ...rest: unknown[]) => {
            if (type === 'Patient' && id === held) {
              entered();
              await gate;
            }
            return (value as (...args: unknown[]) => unknown).call(target, type, id, ...rest);
          };
        },
      });
    const host = await startTestHost({ wrapStore: holding, plugin: { chatLimits: { maxConcurrentTurns: 1 } } });
    try {
      const project = await host.seedProject();
      const stored = await host.store.readResource<Project>('Project', project.projectId);
      await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: 'allow' }] });
      const token = await host.accessTokenFor(project.ids['practitioner-membership']);
      const post = (body: unknown): Promise<Response> =>
        fetch(`${host.url}projects/${project.projectId}/mcp`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' },
          body: JSON.stringify(body),
        });
      held = project.ids['patient-in-care-team-1'];
      const running = post({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_record', arguments: { patient_id: held, reference: `Patient/${held}` } } });
      await reached;
      const refused = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/Too many MCP requests running/);
      release();
      expect((await running).status).toBe(200);
      await (await running).text();
      expect((await post({ jsonrpc: '2.0', id: 3, method: 'tools/list' })).status).toBe(200);
    } finally {
      release();
      await host.close();
    }
  });
});
