/**
 * The MCP endpoint: MCP's Streamable HTTP transport at `/mcp`, and at `/projects/{project_id}/mcp` for clients that
 * can set a URL and a token but no header. The caller is authenticated as on `/v1` (chat/authenticate-caller.ts):
 * a Medplum access token or a ClientApplication key, the project from `X-Project-ID` or the URL. Without a valid
 * credential: 401 with `WWW-Authenticate: Bearer resource_metadata=...`, the RFC 9728 document that names the
 * Medplum server as the authorization server, so clients that discover it sign the user in through Medplum's OAuth.
 *
 * Each HTTP request gets a fresh MCP server over the SDK's `createMcpHandler`, bound to that request's caller (its
 * tools' input schemas, which hold nothing of a caller, are compiled once per process: input-schemas.ts). A
 * 2025-11-25 client's `initialize` opens a session (mcp-sessions.ts) that only names the client in later requests'
 * records; DELETE with its id ends it. GET (a server-initiated stream) answers 405: the server sends nothing unasked.
 */
import express, { type Request, type Response, type Router } from 'express';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { AppError } from '../errors.ts';
import { authenticateCaller } from '../chat/authenticate-caller.ts';
import { patientContextOptionsFor, type PatientContextOptions } from '../chat/patient-context.ts';
import type { FhirToolsOptions } from '../chat/fhir-tools.ts';
import { requireStored } from '../chat/reply-records.ts';
import type { CallerSlots } from '../chat/caller-slots.ts';
import type { CallerContext, FhirgateHost } from '../host.ts';
import { readJsonBody, type BodyLimits } from '../http/json-body.ts';
import { FHIRGATE_VERSION } from '../version.ts';
import { mcpPatientDataRuleOf } from './mcp-patient-data.ts';
import { InputSchemas } from './input-schemas.ts';
import { registerMcpTools } from './mcp-tools.ts';
import { sendMcpError } from './mcp-error-response.ts';
import type { McpRateLimit } from './mcp-rate-limit.ts';
import { clientInfoOf, type McpSession, type McpSessions } from './mcp-sessions.ts';
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
  /** MCP requests one caller may make per minute, across instances (429 beyond). */
  readonly rate: McpRateLimit;
  /**
   * The authorization server the metadata names: the Medplum server's `issuer`, which MCP clients check against its
   * own metadata (RFC 8414). Unset: the origin the request came to, which is the issuer when clients reach the
   * server at its base URL.
   */
  readonly authorizationServer?: string;
  readonly sessions: McpSessions;
}

/** The header of MCP's Streamable HTTP transport that carries a session's id. */
const SESSION_HEADER = 'mcp-session-id';

/** The MCP endpoint and its protected-resource metadata. */
export function createMcpRoute(services: McpServices): Router {
  const router = express.Router();
  // Compiled once for the process: a fresh server per request need not compile its tools' schemas again.
  const schemas = new InputSchemas();
  router.get(MCP_METADATA_PATHS, (request, response) => {
    const resource = `${originOf(request)}${request.originalUrl.split('?')[0].replace('/.well-known/oauth-protected-resource', '')}`;
    response.json({
      resource,
      authorization_servers: [services.authorizationServer ?? `${originOf(request)}/`],
      // A Medplum server asks every authorization request for a scope; `openid` is the least, and what an MCP
      // client sends when the metadata names it (the token's access is the user's AccessPolicy, whatever the scope).
      scopes_supported: ['openid'],
      bearer_methods_supported: ['header'],
      resource_name: 'fhirgate MCP server',
    });
  });
  const endpoint = express.Router({ mergeParams: true });
  endpoint.use(async (request, response, next) => {
    // The endpoint is the path itself: what lies under it (a Medplum server's own MCP server at /mcp/stream and
    // /mcp/sse) is the server's, untouched.
    if (request.path !== '/') {
      next('router');
      return;
    }
    try {
      response.locals.caller = await authenticateCaller(services.host, request, { projectFromCredential: true });
    } catch (error) {
      sendMcpError(response, error, { resourceMetadata: metadataUrlOf(request), logger: services.host.logger });
      return;
    }
    try {
      // Counted before the body is read: a caller over the limit costs the instance no parsing.
      await services.rate.consume(callerKeyOf(response.locals.caller as CallerContext));
      next();
    } catch (error) {
      sendMcpError(response, error, { logger: services.host.logger });
    }
  });
  endpoint.post('/', requireJsonContentType, readJsonBody({ ...services.body, strict: false }), requireOneMessage);
  endpoint.all('/', async (request, response) => {
    try {
      const caller = response.locals.caller as CallerContext;
      const release = services.slots.take(callerKeyOf(caller));
      response.on('close', release);
      const session = await sessionOf(services, request, caller);
      if (request.method === 'DELETE' && session) {
        await services.sessions.end(request.get(SESSION_HEADER) ?? '');
        response.status(204).end();
        return;
      }
      await serveMcp(services, request, response, caller, session, schemas);
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
async function serveMcp(services: McpServices, request: Request, response: Response, caller: CallerContext, session: McpSession | undefined, schemas: InputSchemas): Promise<void> {
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
        // only, and its session keeps it; without one (Redis did not answer) its User-Agent is recorded instead.
        client: () => server.server.getClientVersion() ?? session?.client,
        userAgent: request.get('user-agent')?.slice(0, 200),
        logger: services.host.logger,
        schemas,
      });
      return server;
    },
    { legacy: 'stateless', onerror: (error) => services.host.logger?.warn('fhirgate MCP request rejected', { error: error.message }) }
  );
  const controller = new AbortController();
  response.on('close', () => controller.abort());
  try {
    const answer = await handler.fetch(toWebRequest(request, controller.signal), request.method === 'POST' ? { parsedBody: request.body } : {});
    const client = answer.ok ? initializingClientOf(request.body) : undefined;
    const id = client ? await services.sessions.open({ projectId: caller.project.id, profile: caller.profile.reference ?? '', client }) : undefined;
    if (id) {
      response.setHeader('Mcp-Session-Id', id);
    }
    await sendWebResponse(answer, response);
  } finally {
    await handler.close();
  }
}

/** Whom the per-caller limits count: the project and the profile. */
function callerKeyOf(caller: CallerContext): string {
  return `${caller.project.id}/${caller.profile.reference ?? ''}`;
}

/**
 * The session a request names, if any: a 2025 client's `initialize` names none (it opens one). An id that is not
 * this caller's session is 404, as the transport asks, so the client initializes again; one that cannot be looked
 * up now (Redis does not answer) is served without the client's name rather than refused.
 */
async function sessionOf(services: McpServices, request: Request, caller: CallerContext): Promise<McpSession | undefined> {
  const id = request.get(SESSION_HEADER);
  if (id === undefined || initializingClientOf(request.body) !== undefined) {
    return undefined;
  }
  const lookup = await services.sessions.find(id, { projectId: caller.project.id, profile: caller.profile.reference ?? '' });
  if (lookup === 'unknown') {
    throw new AppError('not_found', 'Session not found: it ended or expired, or it is not this caller’s. Initialize a new session.');
  }
  return lookup === 'unavailable' ? undefined : lookup.found;
}

/** The clientInfo of a 2025 `initialize` request's body; undefined for any other body. */
function initializingClientOf(body: unknown): McpSession['client'] | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || (body as { method?: unknown }).method !== 'initialize') {
    return undefined;
  }
  return clientInfoOf((body as { params?: unknown }).params);
}

/** MCP's transport posts JSON-RPC as `application/json`; anything else is 415 before the body is read. */
function requireJsonContentType(request: Request, _response: Response, next: express.NextFunction): void {
  next(request.is('application/json') === 'application/json' ? undefined : new AppError('unsupported_media_type', 'Send the JSON-RPC message with Content-Type: application/json.'));
}

/** One JSON-RPC message, an object: the 2025-11-25 and later revisions have no batches. */
function requireOneMessage(request: Request, _response: Response, next: express.NextFunction): void {
  const body: unknown = request.body;
  next(typeof body === 'object' && body !== null && !Array.isArray(body) ? undefined : new AppError('invalid_request', 'The body must be one JSON-RPC message, a JSON object; batches are not accepted.'));
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
