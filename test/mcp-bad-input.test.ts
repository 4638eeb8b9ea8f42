/**
 * Bad input at the MCP endpoint, sent as a careless or hostile client would: each is answered in MCP's own terms
 * (a JSON-RPC error with a clear message and the HTTP status that fits, or a tool error), never an HTML page or a
 * stack trace, and nothing reaches the store.
 */
import type { AuditEvent, Project } from '@medplum/fhirtypes';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { MCP_PATIENT_DATA_SETTING } from '../plugin/mcp/mcp-patient-data.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

type JsonRpcError = { readonly jsonrpc: string; readonly id: unknown; readonly error: { readonly code: number; readonly message: string } };
type JsonRpcResult = { readonly jsonrpc: string; readonly id: unknown; readonly result: { readonly isError?: boolean; readonly content: readonly { readonly text?: string }[] } };

const MAX_BODY_BYTES = 8 * 1024;
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } };

describe('MCP endpoint, bad input', () => {
  let host: TestHost;
  let project: SeededProject;
  let token: string;

  beforeAll(async () => {
    host = await startTestHost({ plugin: { maxBodyBytes: MAX_BODY_BYTES } });
    project = await host.seedProject();
    const stored = await host.store.readResource<Project>('Project', project.projectId);
    await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: 'allow' }] });
    token = await host.accessTokenFor(project.ids['practitioner-membership']);
  });
  afterAll(() => host.close());

  /** A POST as the 2025 transport sends it, with `headers` overriding its own. */
  const post = (body: string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${host.url}projects/${project.projectId}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25', ...headers },
      body,
    });
  /** The JSON-RPC message of an answer, whether sent as JSON or as one SSE event. */
  const messageOf = async (response: Response): Promise<unknown> => {
    const text = await response.text();
    expect(text).not.toMatch(/\bat .+\.(ts|js|mjs):\d+/);
    expect(text).not.toMatch(/<html/i);
    const data = response.headers.get('content-type')?.startsWith('text/event-stream') ? /^data: (.*)$/m.exec(text)?.[1] ?? '' : text;
    return JSON.parse(data);
  };
  const auditEvents = async (): Promise<number> => (await (await host.standalone.host.getSystemRepo(project.projectId)).searchResources<AuditEvent>({ resourceType: 'AuditEvent', filters: [] })).length;
  const call = (params: unknown): string => JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params });
  const patientId = (): string => project.ids['patient-in-care-team-1'];

  test.each([
    ['malformed JSON', () => post('{"jsonrpc": "2.0", "id": 1, "method": '), 400, -32700, /not valid JSON/],
    ['a JSON-RPC batch', () => post(JSON.stringify([INITIALIZE, { jsonrpc: '2.0', id: 2, method: 'tools/list' }])), 400, -32600, /batches are not accepted/],
    ['a JSON string', () => post('"tools/list"'), 400, -32600, /one JSON-RPC message, a JSON object/],
    ['a JSON number', () => post('42'), 400, -32600, /one JSON-RPC message, a JSON object/],
    ['an object that is no JSON-RPC message', () => post(JSON.stringify({ hello: 'world' })), 400, -32600, /not a valid JSON-RPC message/],
    ['a body over maxBodyBytes', () => post(JSON.stringify({ ...INITIALIZE, padding: 'x'.repeat(MAX_BODY_BYTES * 2) })), 413, -32600, /larger than this server accepts/],
    ['Content-Type text/plain', () => post(JSON.stringify(INITIALIZE), { 'Content-Type': 'text/plain' }), 415, -32600, /Content-Type: application\/json/],
    ['a form post', () => post('jsonrpc=2.0&method=tools/list', { 'Content-Type': 'application/x-www-form-urlencoded' }), 415, -32600, /Content-Type: application\/json/],
    ['Accept without text/event-stream', () => post(JSON.stringify(INITIALIZE), { Accept: 'application/json' }), 406, -32000, /Accept/],
    ['Accept text/html', () => post(JSON.stringify(INITIALIZE), { Accept: 'text/html' }), 406, -32000, /Accept/],
  ] as const)('%s: a JSON-RPC error with its HTTP status, nothing stored', async (_name, send, status, code, message) => {
    const before = await auditEvents();
    const response = await send();
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const answer = (await messageOf(response)) as JsonRpcError;
    expect(answer).toMatchObject({ jsonrpc: '2.0', error: { code, message: expect.stringMatching(message) } });
    expect(await auditEvents()).toBe(before);
  });

  test.each([
    ['an unknown method', () => post(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'patients/delete_all' })), -32601, /not found/i],
    ['an unknown tool', () => post(call({ name: 'delete_patient', arguments: { patient_id: 'x' } })), -32602, /delete_patient/],
    ['arguments that are not an object', () => post(call({ name: 'find_patients', arguments: 'Lopez' })), -32602, /arguments/],
    ['a tools/call without a name', () => post(call({ arguments: {} })), -32602, /name/],
  ] as const)('%s: a JSON-RPC error naming what is wrong, nothing stored', async (_name, send, code, message) => {
    const before = await auditEvents();
    const response = await send();
    expect(response.status).toBeLessThan(500);
    const answer = (await messageOf(response)) as JsonRpcError;
    expect(answer).toMatchObject({ jsonrpc: '2.0', id: 3, error: { code, message: expect.stringMatching(message) } });
    expect(await auditEvents()).toBe(before);
  });

  test.each([
    ['a name that is a number', { name: 'find_patients', arguments: { name: 42 } }, /name/],
    ['a patient_id that is an object', { name: 'read_record', arguments: { patient_id: { id: 'x' }, reference: 'Condition/1' } }, /patient_id/],
    ['params that are a string', { name: 'search_patient_records', arguments: { patient_id: 'x', resource_type: 'Condition', params: 'code=1' } }, /params/],
    ['a property the tool does not take', { name: 'read_record', arguments: { patient_id: 'x', reference: 'Condition/1', sql: 'drop table' } }, /sql|additional/i],
  ] as const)('tool arguments of the wrong type (%s): a tool error saying which, nothing disclosed', async (_name, params, message) => {
    const before = await auditEvents();
    const args = { ...params.arguments, ...('patient_id' in params.arguments && params.arguments.patient_id === 'x' ? { patient_id: patientId() } : {}) };
    const response = await post(call({ ...params, arguments: args }));
    expect(response.status).toBe(200);
    const answer = (await messageOf(response)) as JsonRpcResult;
    expect(answer.result.isError).toBe(true);
    expect(answer.result.content.map((part) => part.text ?? '').join('')).toMatch(message);
    expect(await auditEvents()).toBe(before);
  });
});
