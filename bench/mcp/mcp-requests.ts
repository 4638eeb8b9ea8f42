/**
 * The requests scenario 12 sends under load, taken from the MCP SDK's own client rather than written by hand: a
 * client of each protocol era connects (a 2025-11-25 client initializes and is given a session; a 2026-07-28
 * client declares itself in each request's envelope), calls each tool once through a `fetch` that records what it
 * sends, and the load replays those `tools/call` requests (URL, headers, body) as they were, so each era's headers
 * and envelope are the real ones. Beside them, the same reads on `/fhir/R4` with the same token: the floor.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { DEMO_PROJECT_ID, MARIA_LOPEZ_ID, type McpHost } from './mcp-host.ts';

/** One request as the load generator sends it. */
export interface PreparedRequest {
  readonly method: 'GET' | 'POST';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

/** The protocol eras measured. */
export type ProtocolEra = '2026-07-28' | '2025-11-25';
export const PROTOCOL_ERAS: readonly ProtocolEra[] = ['2026-07-28', '2025-11-25'];

/** The tools measured, each with its arguments, and the FHIR request that reads the same (the floor), if one does. */
export const MEASURED_TOOLS = [
  { tool: 'find_patients', arguments: () => ({ name: 'Lopez' }), floor: () => `Patient?name=Lopez&_count=20` },
  {
    tool: 'search_patient_records',
    arguments: () => ({ patient_id: MARIA_LOPEZ_ID, resource_type: 'Observation', params: { code: 'http://loinc.org|8867-4' } }),
    floor: () => `Observation?subject=Patient/${MARIA_LOPEZ_ID}&code=${encodeURIComponent('http://loinc.org|8867-4')}&_count=20`,
  },
  { tool: 'read_record', arguments: (observationId: string) => ({ patient_id: MARIA_LOPEZ_ID, reference: `Observation/${observationId}` }), floor: (observationId: string) => `Observation/${observationId}` },
  { tool: 'get_patient_summary', arguments: () => ({ patient_id: MARIA_LOPEZ_ID }), floor: undefined },
] as const;
export type MeasuredTool = (typeof MEASURED_TOOLS)[number]['tool'];

/** Each tool's `tools/call` request of each era, as the SDK's client sent it, checked to answer without an error. */
export async function recordToolCalls(host: McpHost): Promise<Record<ProtocolEra, Record<MeasuredTool, PreparedRequest>>> {
  const recorded = {} as Record<ProtocolEra, Record<MeasuredTool, PreparedRequest>>;
  for (const era of PROTOCOL_ERAS) {
    const calls = {} as Record<MeasuredTool, PreparedRequest>;
    const { client, last } = await connectRecording(host, era);
    for (const measured of MEASURED_TOOLS) {
      const answer = (await client.callTool({ name: measured.tool, arguments: measured.arguments(host.chart.observationId) })) as { isError?: boolean; content: { text?: string }[] };
      if (answer.isError) {
        throw new Error(`${measured.tool} (${era}) answered a tool error: ${answer.content.map((part) => part.text ?? '').join('')}`);
      }
      calls[measured.tool] = last('tools/call');
    }
    recorded[era] = calls;
  }
  return recorded;
}

/** Each era's `tools/list` (an MCP exchange that runs no tool and reads no store), as the SDK's client sent it. */
export async function recordToolLists(host: McpHost): Promise<Record<ProtocolEra, PreparedRequest>> {
  const recorded = {} as Record<ProtocolEra, PreparedRequest>;
  for (const era of PROTOCOL_ERAS) {
    const { client, last } = await connectRecording(host, era);
    await client.listTools();
    recorded[era] = last('tools/list');
  }
  return recorded;
}

/**
 * A client of `era` whose requests are recorded; `last(method)` is the last POST it sent, checked to be `method`.
 * A 2025 client's session stays open (the recorded requests carry its id); the client is dropped without a DELETE.
 */
async function connectRecording(host: McpHost, era: ProtocolEra): Promise<{ readonly client: Client; readonly last: (method: string) => PreparedRequest }> {
  let last: PreparedRequest | undefined;
  const recordingFetch = async (input: string | URL | globalThis.Request, init?: RequestInit): Promise<Response> => {
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, name) => (headers[name] = value));
    if (init?.method === 'POST' && typeof init.body === 'string') {
      last = { method: 'POST', url: String(input), headers, body: init.body };
    }
    return fetch(input, init);
  };
  const transport = new StreamableHTTPClientTransport(new URL(`${host.url}projects/${DEMO_PROJECT_ID}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${host.token}` } },
    fetch: recordingFetch,
  });
  const client = new Client({ name: 'fhirgate-bench', version: '1.0.0' }, { versionNegotiation: { mode: era === '2026-07-28' ? 'auto' : 'legacy' } });
  await client.connect(transport);
  if ((era === '2025-11-25') !== (transport.sessionId !== undefined)) {
    throw new Error(`the ${era} client ${transport.sessionId === undefined ? 'was given no session' : 'was given a session'}`);
  }
  return {
    client,
    last: (method) => {
      if (!last?.body?.includes(`"method":"${method}"`)) {
        throw new Error(`the ${era} client's ${method} was not recorded: ${last?.body?.slice(0, 200) ?? 'nothing sent'}`);
      }
      return last;
    },
  };
}

/** The floor: each tool's read on `/fhir/R4` with the same token (the summary has no single request). */
export function floorRequests(host: McpHost): Partial<Record<MeasuredTool, PreparedRequest>> {
  const floors: Partial<Record<MeasuredTool, PreparedRequest>> = {};
  for (const measured of MEASURED_TOOLS) {
    if (measured.floor) {
      floors[measured.tool] = { method: 'GET', url: `${host.url}fhir/R4/${measured.floor(host.chart.observationId)}`, headers: { Authorization: `Bearer ${host.token}`, Accept: 'application/fhir+json' } };
    }
  }
  return floors;
}
