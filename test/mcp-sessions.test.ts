/**
 * Sessions of 2025-11-25 MCP clients, on two instances sharing one store and one Redis: the SDK's own client,
 * pinned to the 2025 handshake, initializes on one instance and calls tools on the other, and the disclosure names
 * it as it declared itself at initialize. The session is its caller's: another user's token, another project, or an
 * id never issued is 404 (as MCP's transport says); DELETE ends it; without a valid token the session is no help.
 * A 2026-07-28 client is given no session and is named from its own requests.
 */
import { MedplumClient } from '@medplum/core';
import type { AuditEvent, Project } from '@medplum/fhirtypes';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Redis } from 'ioredis';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { MCP_PATIENT_DATA_SETTING } from '../plugin/mcp/mcp-patient-data.ts';
import { connectTestRedis, describeWithRedis } from './support/redis.ts';
import { seedChart, type SeededChart } from './support/seeded-chart.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

type ToolAnswer = { readonly isError?: boolean; readonly content: readonly { readonly type: string; readonly text?: string }[] };

describeWithRedis('MCP sessions of 2025 clients, across two instances', () => {
  let redis: Redis;
  let first: TestHost;
  let second: TestHost;
  let project: SeededProject;
  let chart: SeededChart;
  let medplum: MedplumClient;
  const clients: Client[] = [];

  beforeAll(async () => {
    redis = connectTestRedis();
    first = await startTestHost({ redis, plugin: {} });
    // The second instance: the same SQLite file (so the same signing keys and records) and the same Redis.
    second = await startTestHost({ redis, plugin: {}, dataDir: first.dataDir });
  });
  afterAll(async () => {
    await second.close({ keepData: true });
    await first.close();
    await redis.quit();
  });
  beforeEach(async () => {
    project = await first.seedProject();
    const system = await first.standalone.host.getSystemRepo(project.projectId);
    chart = await seedChart(system, project);
    const stored = await first.store.readResource<Project>('Project', project.projectId);
    await first.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: 'allow' }] });
    medplum = new MedplumClient({ baseUrl: first.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
  });

  /** The SDK's client on `first`, its requests sent to `to()`'s instance once connected (a load balancer's choice). */
  const connect = async (era: 'legacy' | 'auto', to: () => TestHost = () => first): Promise<{ client: Client; transport: StreamableHTTPClientTransport; token: string }> => {
    const token = await first.accessTokenFor(project.ids['practitioner-membership']);
    const path = `projects/${project.projectId}/mcp`;
    const balanced = (url: string | URL, init?: RequestInit): Promise<Response> => fetch(String(url).replace(first.url, to().url), init);
    const transport = new StreamableHTTPClientTransport(new URL(`${first.url}${path}`), { requestInit: { headers: { Authorization: `Bearer ${token}` } }, fetch: balanced });
    const client = new Client({ name: 'legacy-editor', version: '0.9.1' }, { versionNegotiation: { mode: era } });
    clients.push(client);
    await client.connect(transport);
    return { client, transport, token };
  };
  const readCondition = async (client: Client): Promise<ToolAnswer> =>
    (await client.callTool({ name: 'read_record', arguments: { patient_id: project.ids['patient-in-care-team-1'], reference: `Condition/${chart.condition.id}` } })) as ToolAnswer;
  const auditsOf = (patientId: string): Promise<AuditEvent[]> => medplum.searchResources('AuditEvent', { entity: `Patient/${patientId}`, _sort: 'date' }, { cache: 'no-cache' });
  /** A raw tools/list in the 2025 era, with `sessionId` and `token`, on `host`. */
  const listWith = (host: TestHost, token: string, sessionId: string, projectId = project.projectId): Promise<Response> =>
    fetch(`${host.url}projects/${projectId}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25', 'Mcp-Session-Id': sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/list' }),
    });

  test('a 2025 client initialized on one instance is named by its clientInfo in the disclosures the other records', async () => {
    let target = first;
    const { client, transport } = await connect('legacy', () => target);
    expect(transport.sessionId).toMatch(/^[\x21-\x7e]{40,}$/);
    target = second;
    expect((await readCondition(client)).isError).toBeUndefined();
    const [audit] = await auditsOf(project.ids['patient-in-care-team-1']);
    expect(audit.agent[1]).toMatchObject({ who: { display: 'MCP client: legacy-editor 0.9.1' }, name: 'legacy-editor 0.9.1' });
    expect(audit.outcomeDesc).toContain('the MCP client legacy-editor 0.9.1');
  });

  test('the session is its caller’s: another user, another project or a forged id is 404, and nothing is disclosed', async () => {
    const { transport } = await connect('legacy');
    const sessionId = transport.sessionId ?? '';
    const reviewer = await first.accessTokenFor(project.ids['reviewer-membership']);
    const refusals = [await listWith(second, reviewer, sessionId)];
    const other = await first.seedProject();
    refusals.push(await listWith(first, await first.accessTokenFor(other.ids['practitioner-membership']), sessionId, other.projectId));
    const own = await first.accessTokenFor(project.ids['practitioner-membership']);
    refusals.push(await listWith(second, own, `${sessionId.slice(0, -4)}AAAA`));
    for (const refused of refusals) {
      expect(refused.status).toBe(404);
      const body = (await refused.json()) as { jsonrpc: string; error: { message: string; data: { code: string } } };
      expect(body).toMatchObject({ jsonrpc: '2.0', error: { message: expect.stringMatching(/^Session not found/), data: { code: 'not_found' } } });
    }
    // The id itself still serves its own caller.
    expect((await listWith(second, own, sessionId)).status).toBe(200);
    expect(await auditsOf(project.ids['patient-in-care-team-1'])).toHaveLength(0);
  });

  test('DELETE with the id ends the session on every instance; a session does not stand in for the token', async () => {
    const { client, transport, token } = await connect('legacy');
    const sessionId = transport.sessionId ?? '';
    const anonymous = await fetch(`${second.url}projects/${project.projectId}/mcp`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(anonymous.status).toBe(401);
    // Another user cannot end it.
    const reviewer = await first.accessTokenFor(project.ids['reviewer-membership']);
    const foreignDelete = await fetch(`${second.url}projects/${project.projectId}/mcp`, { method: 'DELETE', headers: { Authorization: `Bearer ${reviewer}`, 'Mcp-Session-Id': sessionId } });
    expect(foreignDelete.status).toBe(404);
    expect((await listWith(second, token, sessionId)).status).toBe(200);

    await transport.terminateSession();
    expect(transport.sessionId).toBeUndefined();
    expect((await listWith(second, token, sessionId)).status).toBe(404);
    expect((await listWith(first, token, sessionId)).status).toBe(404);
    void client;
  });

  test('a 2026-07-28 client gets no session and is named from its own requests, on either instance', async () => {
    let target = first;
    const { client, transport } = await connect('auto', () => target);
    expect(transport.sessionId).toBeUndefined();
    target = second;
    expect((await readCondition(client)).isError).toBeUndefined();
    const [audit] = await auditsOf(project.ids['patient-in-care-team-1']);
    expect(audit.agent[1].who?.display).toBe('MCP client: legacy-editor 0.9.1');
  });
});
