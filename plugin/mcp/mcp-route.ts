/**
 * The MCP endpoint: MCP's Streamable HTTP transport at `/mcp`, and at `/projects/{project_id}/mcp` for clients that
 * can set a URL and a token but no header. The caller is authenticated as on `/v1` (chat/authenticate-caller.ts):
 * a Medplum access token or a ClientApplication key, the project from `X-Project-ID` or the URL. Without a valid
 * credential: 401 with `WWW-Authenticate: Bearer resource_metadata=...`, the RFC 9728 document that names the
 * Medplum server as the authorization server, so clients that discover it sign the user in through Medplum's OAuth.
 *
 * Stateless: each HTTP request gets a fresh MCP server over the SDK's `createMcpHandler`, bound to that request's
 * caller; no session is kept between requests (GET and DELETE, the 2025 session operations, answer 405).
 */
import express, { type Request, type Response, type Router } from 'express';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { authenticateCaller } from '../chat/authenticate-caller.ts';
import { patientContextOptionsFor, type PatientContextOptions } from '../chat/patient-context.ts';
import type { FhirToolsOptions } from '../chat/fhir-tools.ts';
import { requireStored } from '../chat/reply-records.ts';
import type { CallerSlots } from '../chat/caller-slots.ts';
import type { CallerContext, FhirgateHost } from '../host.ts';
import { readJsonBody, type BodyLimits } from '../http/json-body.ts';
import { FHIRGATE_VERSION } from '../version.ts';
import { mcpPatientDataRuleOf } from './mcp-patient-data.ts';
import { registerMcpTools } from './mcp-tools.ts';
import { sendMcpError } from './mcp-error-response.ts';
import { sendWebResponse, toWebRequest } from './web-exchange.ts';

/** The MCP endpoint's paths: without and with the project in the URL. */
export const MCP_PATHS = ['/mcp', '/projects/:projectId/mcp'];
/** Where the protected-resource metadata of an MCP path is served (RFC 9728: the well-known prefix before the path). */
export const MCP_METADATA_PATHS = MCP_PATHS.map((path) => `/.well-known/oauth-protected-resource${path}`);

/** What the MCP endpoint needs. */
export interface McpServices {
  readonly host: FhirgateHost;
  readonly patientContext: PatientContextOptions & { readonly enabled: boolean; readonly tools: FhirToolsOptions };
  readonly body: BodyLimits;
  /** MCP requests one caller (project and profile) may have running on this instance at once (429 beyond). */
  readonly slots: CallerSlots;
  /** The server's de-identification key (`deIdentification.dateShiftKey`), for projects that de-identify. */
  readonly dateShiftKey?: string;
}

/** The MCP endpoint and its protected-resource metadata. */
export function createMcpRoute(services: McpServices): Router {
  const router = express.Router();
  router.get(MCP_METADATA_PATHS, (request, response) => {
    const resource = `${originOf(request)}${request.originalUrl.split('?')[0].replace('/.well-known/oauth-protected-resource', '')}`;
    response.json({ resource, authorization_servers: [`${originOf(request)}/`], bearer_methods_supported: ['header'], resource_name: 'fhirgate MCP server' });
  });
  const endpoint = express.Router({ mergeParams: true });
  endpoint.use(async (request, response, next) => {
    try {
      response.locals.caller = await authenticateCaller(services.host, request);
      next();
    } catch (error) {
      sendMcpError(response, error, { resourceMetadata: metadataUrlOf(request), logger: services.host.logger });
    }
  });
  endpoint.post('/', readJsonBody(services.body));
  endpoint.all('/', async (request, response) => {
    try {
      const caller = response.locals.caller as CallerContext;
      const release = services.slots.take(`${caller.project.id}/${caller.profile.reference ?? ''}`);
      response.on('close', release);
      await serveMcp(services, request, response, caller);
    } catch (error) {
      sendMcpError(response, error, { logger: services.host.logger });
    }
  });
  endpoint.use((error: unknown, request: Request, response: Response, _next: express.NextFunction) => {
    sendMcpError(response, error, { logger: services.host.logger });
  });
  router.use(MCP_PATHS, endpoint);
  return router;
}

/** One MCP exchange: a server made for this caller, the SDK's handler, the answer written back. */
async function serveMcp(services: McpServices, request: Request, response: Response, caller: CallerContext): Promise<void> {
  const sharing = patientContextOptionsFor(caller.project, services.patientContext);
  const rule = mcpPatientDataRuleOf(caller.project);
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: 'fhirgate', version: FHIRGATE_VERSION });
      registerMcpTools(server, {
        caller,
        types: sharing.enabled ? sharing.resourceTypes : [],
        options: sharing.tools,
        summary: sharing,
        rule,
        dateShiftKey: services.dateShiftKey,
        systemRepo: () => services.host.getSystemRepo(caller.project.id),
        recordDisclosure: async (event) => {
          const system = await services.host.getSystemRepo(caller.project.id);
          await requireStored(() => system.createResource(event));
        },
        // Declared by the client in each request's envelope (2026-07-28). A 2025 client declares it at initialize
        // only, which a stateless server does not keep: its User-Agent is recorded instead, as such.
        client: () => server.server.getClientVersion(),
        userAgent: request.get('user-agent')?.slice(0, 200),
        logger: services.host.logger,
      });
      return server;
    },
    { legacy: 'stateless', onerror: (error) => services.host.logger?.warn('fhirgate MCP request rejected', { error: error.message }) }
  );
  const controller = new AbortController();
  response.on('close', () => controller.abort());
  try {
    const answer = await handler.fetch(toWebRequest(request, controller.signal), request.method === 'POST' ? { parsedBody: request.body } : {});
    await sendWebResponse(answer, response);
  } finally {
    await handler.close();
  }
}

function originOf(request: Request): string {
  return `${request.protocol}://${request.get('host') ?? 'localhost'}`;
}

/** The metadata URL of the MCP path a request came to (with whatever prefix the server mounts fhirgate under). */
function metadataUrlOf(request: Request): string {
  const prefix = request.baseUrl.replace(/\/(projects\/[^/]+\/)?mcp$/, '');
  const path = request.baseUrl.slice(prefix.length);
  return `${originOf(request)}${prefix}/.well-known/oauth-protected-resource${path}`;
}
