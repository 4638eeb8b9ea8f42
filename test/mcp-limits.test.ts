/**
 * MCP requests per caller and minute (`mcpLimits.requestsPerMinute`), on two instances sharing one store and one
 * Redis: the count is the caller's across both, the request beyond it is 429 with Retry-After and the endpoint's
 * JSON-RPC error body, nothing of it reaches the store, and another caller of the same project is not held back.
 */
import type { AuditEvent, Project } from '@medplum/fhirtypes';
import type { Redis } from 'ioredis';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { MCP_PATIENT_DATA_SETTING } from '../plugin/mcp/mcp-patient-data.ts';
import { connectTestRedis, describeWithRedis } from './support/redis.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

const PER_MINUTE = 3;

describeWithRedis('MCP requests per caller and minute, across two instances', () => {
  let redis: Redis;
  let first: TestHost;
  let second: TestHost;
  let project: SeededProject;

  beforeAll(async () => {
    redis = connectTestRedis();
    const plugin = { mcpLimits: { requestsPerMinute: PER_MINUTE } };
    first = await startTestHost({ redis, plugin });
    second = await startTestHost({ redis, plugin, dataDir: first.dataDir });
    project = await first.seedProject();
    const stored = await first.store.readResource<Project>('Project', project.projectId);
    await first.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: 'allow' }] });
  });
  afterAll(async () => {
    await second.close({ keepData: true });
    await first.close();
    await redis.quit();
  });

  const readPatient = (host: TestHost, token: string): Promise<Response> => {
    const patientId = project.ids['patient-in-care-team-1'];
    return fetch(`${host.url}projects/${project.projectId}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_record', arguments: { patient_id: patientId, reference: `Patient/${patientId}` } } }),
    });
  };
  const disclosures = async (): Promise<number> =>
    (await (await first.standalone.host.getSystemRepo(project.projectId)).searchResources<AuditEvent>({ resourceType: 'AuditEvent', filters: [{ code: 'entity', operator: 'eq', value: `Patient/${project.ids['patient-in-care-team-1']}` }] })).length;

  test('the caller’s requests on both instances share one count; beyond it, 429 with Retry-After in the JSON-RPC shape', async () => {
    const token = await first.accessTokenFor(project.ids['practitioner-membership']);
    const served = [await readPatient(first, token), await readPatient(second, token), await readPatient(first, token)];
    for (const response of served) {
      expect(response.status).toBe(200);
      await response.text();
    }
    expect(await disclosures()).toBe(PER_MINUTE);

    const refused = await readPatient(second, token);
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await refused.json()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: `Too many MCP requests: at most ${PER_MINUTE} per minute per caller. Retry after the time given.`, data: { code: 'rate_limited' } },
    });
    expect((await readPatient(first, token)).status).toBe(429);
    expect(await disclosures()).toBe(PER_MINUTE);

    // Another user of the project has a count of her own.
    const reviewer = await first.accessTokenFor(project.ids['reviewer-membership']);
    const other = await readPatient(second, reviewer);
    expect(other.status).toBe(200);
    await other.text();
  });
});
