/**
 * The MCP SDK's own client, over Streamable HTTP, for tests of the MCP server: signed in as a membership of a seeded
 * project (the demo practitioner by default) or with the project's ClientApplication key, at the project's URL.
 */
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { TestHost } from './test-host.ts';

/** A tool's answer as the SDK's client reads it. */
export type ToolAnswer = { readonly isError?: boolean; readonly content: readonly { readonly type: string; readonly text?: string }[] };

/** A connected client with the calls tests make. */
export interface McpTestClient {
  readonly client: Client;
  call(name: string, args: Record<string, unknown>): Promise<ToolAnswer>;
  /** A tool's answer text, parsed as JSON. */
  json<T>(name: string, args: Record<string, unknown>): Promise<T>;
  close(): Promise<void>;
}

/** Connects to `projects/<id>/mcp`; `credential`: a membership's token (default the practitioner's) or the client's key. */
export async function connectMcp(host: TestHost, project: SeededProject, credential: { readonly membership?: string; readonly clientKey?: boolean } = {}): Promise<McpTestClient> {
  const bearer = credential.clientKey
    ? `${project.client?.id ?? ''}:${project.client?.secret ?? ''}`
    : await host.accessTokenFor(project.ids[credential.membership ?? 'practitioner-membership']);
  const transport = new StreamableHTTPClientTransport(new URL(`${host.url}projects/${project.projectId}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } });
  const client = new Client({ name: 'mcp-test-client', version: '1.2.3' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(transport);
  const call = async (name: string, args: Record<string, unknown>): Promise<ToolAnswer> => (await client.callTool({ name, arguments: args })) as ToolAnswer;
  return {
    client,
    call,
    json: async <T>(name: string, args: Record<string, unknown>): Promise<T> => {
      const answer = await call(name, args);
      if (answer.isError) {
        throw new Error(`${name} answered an error: ${textOf(answer)}`);
      }
      return JSON.parse(textOf(answer)) as T;
    },
    close: () => client.close(),
  };
}

/** The text of a tool's answer. */
export function textOf(answer: ToolAnswer): string {
  return answer.content.map((part) => part.text ?? '').join('');
}
