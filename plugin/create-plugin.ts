/**
 * `createFhirgatePlugin(host, options)`: the plugin's Express router, built once per server from the host port
 * and the parsed options. The chat, device-token and `/graphql` routes are wired here; everything they need from
 * the server comes through `host`.
 */
import express, { type Response, type Router } from 'express';
import { AgentDevices } from './chat/agent-device.ts';
import { authenticateCaller, PROJECT_BASE_PATH } from './chat/authenticate-caller.ts';
import type { ChatServices } from './chat/chat-completion.ts';
import { createChatRoutes } from './chat/chat-routes.ts';
import { createSettingsChangeAudit, SETTINGS_ROUTE } from './governance/settings-change-audit.ts';
import { createResponsesRoutes } from './responses/responses-routes.ts';
import { AppError } from './errors.ts';
import { createDeviceServices } from './devices/device-services.ts';
import { createDeviceTokenRoute } from './devices/device-token-route.ts';
import { createGraphqlRoute } from './graphql/graphql-route.ts';
import { createModelRegistry } from './llm/model-registry.ts';
import type { FhirgateHost } from './host.ts';
import { authenticateFirst, authenticatingOncePerRequest } from './http/authenticate-first.ts';
import { readJsonBody } from './http/json-body.ts';
import { createOpenAiErrorHandler, sendOpenAiError } from './http/openai-error-response.ts';
import { holdUnauthenticatedPlace, UnauthenticatedRequests } from './http/unauthenticated-requests.ts';
import { sendGraphqlError } from './graphql/graphql-response.ts';
import { parseFhirgateOptions, type FhirgateOptionsInput } from './options.ts';
import { InFlightTurns, shuttingDownError } from './chat/in-flight-turns.ts';
import { ReplyJournal } from './chat/reply-journal.ts';
import { ReplyRecords } from './chat/reply-records.ts';
import { TurnRegistry } from './chat/turn-registry.ts';
import { TurnAdmission } from './chat/turn-admission.ts';
import { CallerSlots } from './chat/caller-slots.ts';
import { createRequestTelemetry, routeOf } from './telemetry/request-telemetry.ts';
import { createTelemetry } from './telemetry/telemetry.ts';
import { countingRepositoryOperations } from './telemetry/repository-operations.ts';
import { FHIRGATE_VERSION } from './version.ts';
import { methodNotAllowed } from './http/method-not-allowed.ts';
import { createGovernance } from './governance/governance.ts';
import { operatorSettingOf, unclearedModels } from './governance/patient-data-settings.ts';
import { createOpenApiRoute } from './openapi/openapi-route.ts';
import { createWebAppRoute } from './web-app-route.ts';
import { createMcpRoute } from './mcp/mcp-route.ts';
import { sendMcpError } from './mcp/mcp-error-response.ts';
import { createMcpRateLimit } from './mcp/mcp-rate-limit.ts';
import { McpSessions } from './mcp/mcp-sessions.ts';
import { createLimiterStore } from './devices/limiter-store.ts';

// A device token request is two short strings.
const DEVICE_TOKEN_BODY_LIMIT = 16 * 1024;

/** The mounted plugin: an Express router, plus a hook the server calls when it shuts down. */
export type FhirgatePlugin = Router & {
  /**
   * Call when the server begins to shut down, before it drains and cuts connections (in a Medplum server: from
   * `preShutdown`; see docs/mounting.md). From then on fhirgate's routes answer 503; chat turns in flight get `graceMs` (default: the `shutdownGraceMs` option) to finish, then the
   * rest are stopped: each reply is recorded as `stopped` with the text delivered so far and its client is told.
   * Resolves once every reply is on record. Calling it again returns the first call's promise.
   */
  close(options?: { readonly graceMs?: number }): Promise<void>;
  /**
   * Settles once the replies an earlier process left unfinished (found in the reply journal) were written, or the
   * first try failed (the rest are retried in the background).
   */
  readonly recovered: Promise<{ readonly recovered: number; readonly pending: number }>;
};

/** A request that arrives while the plugin closes: 503 in its surface's error shape, and the connection closes. */
function refuseWhileClosing(route: string, response: Response): void {
  const error = shuttingDownError();
  response.setHeader('Connection', 'close');
  if (route === '/graphql') {
    sendGraphqlError(response, error);
  } else if (route === '/mcp') {
    sendMcpError(response, error, {});
  } else {
    sendOpenAiError(response, error);
  }
}

// The types fhirgate writes and `/graphql` serves: a host whose @medplum/core has not indexed them would answer
// every request with a schema error, so the mount fails instead.
const REQUIRED_RESOURCE_TYPES = ['Communication', 'Observation', 'Device', 'AuditEvent', 'Patient'];

function requireHostDefinitions(host: FhirgateHost): void {
  const missing = REQUIRED_RESOURCE_TYPES.filter((type) => !host.fhir.isResourceType(type));
  if (missing.length > 0) {
    throw new Error(
      `fhirgate cannot mount: the host's FHIR definitions do not define ${missing.join(', ')}. ` +
        "Load Medplum's StructureDefinitions first (a Medplum server does in initAppServices, before initApp mounts fhirgate), " +
        "and pass the server's own FhirRouter and isResourceType, from the @medplum packages the server itself uses (docs/mounting.md)."
    );
  }
}

/** Creates the plugin router for a server; options are validated here, once. */
export function createFhirgatePlugin(serverHost: FhirgateHost, optionsInput: FhirgateOptionsInput = {}): FhirgatePlugin {
  const options = parseFhirgateOptions(optionsInput);
  requireHostDefinitions(serverHost);
  // Routes check the caller before they read the body, and the chat pipeline's step 1 asks again: one check.
  // Every repository the host hands out counts the operations of the turn that uses it.
  const host = authenticatingOncePerRequest(countingRepositoryOperations(serverHost));
  const unauthenticated = new UnauthenticatedRequests(options.maxUnauthenticatedRequests);
  // Every body of fhirgate's routes is JSON, whatever Content-Type the client declares (curl -d says a form).
  const jsonLimits = { maxBytes: options.maxBodyBytes, maxDepth: options.maxJsonDepth, anyContentType: true };
  const telemetry = createTelemetry(FHIRGATE_VERSION);
  const inFlight = new InFlightTurns();
  const journal = ReplyJournal.open(options.replyJournalDir);
  if (!options.replyJournalDir) {
    host.logger?.warn('fhirgate runs without a reply journal: replies of turns running when the process dies are not recovered', {});
  }
  const agents = new AgentDevices(
    { systemRepo: (projectId) => host.getSystemRepo(projectId), deviceRepo: (projectId, policy, device) => host.getDeviceRepo(projectId, policy, device) },
    options.agentDeviceName
  );
  // With the host's Redis, the turns of an instance lost for good are recorded by another (chat/turn-registry.ts).
  const registry = host.redis ? new TurnRegistry(host.redis, host.logger, { keyPrefix: options.redisKeyPrefix }) : undefined;
  // Made before the reply records: the replies recovered at start-up count against the budgets.
  const governance = createGovernance(host, options.governance, options.redisKeyPrefix, telemetry, options.categorySystem);
  const records = new ReplyRecords({
    journal,
    agentRepo: (projectId) => agents.repoFor(projectId),
    onStored: (projectId, stored) => agents.rememberWritten(projectId, stored),
    onRecovered: (projectId, reply, counted) => governance.budgets.recovered(projectId, reply, counted),
    systemRepo: (projectId) => host.getSystemRepo(projectId),
    registry,
    logger: host.logger,
  });
  const recovered = records.recover().catch((error: unknown) => {
    host.logger?.error('fhirgate could not recover unfinished replies; they stay in the journal', { error: String(error) });
    return { recovered: 0, pending: records.pending };
  });
  let closing = false;
  const router = express.Router();
  router.use(createRequestTelemetry(telemetry, host.logger, (request) => host.requestIdOf?.(request)));
  router.use((request, response, next) => {
    const route = closing ? routeOf(request.path) : undefined;
    if (route) {
      refuseWhileClosing(route, response);
      return;
    }
    next();
  });
  // Medplum's settings route passes through, and fhirgate records the AuditEvent of what it changed.
  router.post(SETTINGS_ROUTE, createSettingsChangeAudit(host));
  // The API's OpenAPI description, unauthenticated, whether or not a provider is configured.
  router.use(createOpenApiRoute(host.logger));
  // The MCP server on the chat's FHIR tools: no model is called, so it serves whether or not a provider is configured.
  // Its calls per caller are bounded as the chat's non-streaming turns are (chatLimits.maxConcurrentTurns), and per
  // minute across instances (mcpLimits); its sessions, which only name 2025 clients, are in Redis too.
  const mcpSlots = new CallerSlots(options.chatLimits.maxConcurrentTurns, 'MCP requests running');
  const mcpCounts = createLimiterStore(host.redis, { logger: host.logger });
  const mcpRoute = createMcpRoute({
    host,
    patientContext: options.patientContext,
    body: jsonLimits,
    slots: mcpSlots,
    dateShiftKey: options.deIdentification.dateShiftKey,
    rate: createMcpRateLimit(options.mcpLimits.requestsPerMinute, mcpCounts, options.redisKeyPrefix),
    sessions: new McpSessions({ redis: host.redis, keyPrefix: options.redisKeyPrefix, logger: host.logger }),
    authorizationServer: options.mcpAuthorizationServer,
  });
  const v1 = express.Router();
  if (options.llm) {
    const uncleared = unclearedModels(options.llm);
    if (uncleared.length > 0) {
      host.logger?.warn(
        `fhirgate: these models are NOT cleared for patient data (${operatorSettingOf(options.llm)}): a turn about a patient is refused on them, or sent de-identified where a project sets AI_PATIENT_DATA_POLICY to de-identify`,
        { models: uncleared }
      );
    }
    const chat: ChatServices = {
      host,
      models: createModelRegistry(options.llm),
      agents,
      categorySystem: options.categorySystem,
      history: options.history,
      defaultMaxTokens: options.llm.maxTokens,
      telemetry,
      inFlight,
      records,
      limits: options.chatLimits,
      patientContext: options.patientContext,
      reportRepositoryOperations: options.reportRepositoryOperations,
      patientData: {
        operatorModels: options.llm.patientDataModels,
        operatorSetting: operatorSettingOf(options.llm),
        dateShiftKey: options.deIdentification.dateShiftKey,
        telemetry,
      },
      streamSlots: new CallerSlots(options.chatLimits.maxConcurrentStreams, 'open streams'),
      turnSlots: new CallerSlots(options.chatLimits.maxConcurrentTurns, 'requests running'),
      admission: new TurnAdmission(options.chatLimits.maxPreparingTurns, telemetry.waitingTurns),
      governance,
    };
    // The token and X-Project-ID are checked before the body is read: without them, a 401 or 403 and nothing read.
    v1.post(['/chat/completions', '/responses'], authenticateFirst((request) => authenticateCaller(host, request)), readJsonBody(jsonLimits));
    v1.use(createChatRoutes(chat, options.operatorName));
    v1.use(createResponsesRoutes(chat));
  } else {
    v1.use(['/chat/completions', '/responses', '/models', '/usage', '/governance'], (_request, _response, next) =>
      next(new AppError('not_configured', 'No LLM provider is configured on this server.'))
    );
  }
  v1.use((request, _response, next) => next(new AppError('not_found', `No route for ${request.method} ${request.baseUrl}${request.path}.`)));
  v1.use(createOpenAiErrorHandler(host.logger));
  // `/v1` with the X-Project-ID header, or the project base URL for clients that can set a base URL but no header.
  router.use(['/v1', PROJECT_BASE_PATH], v1);
  // After the chat's routes, which a request reaches sooner: their paths do not overlap.
  router.use(mcpRoute);
  if (options.webApp) {
    router.use(createWebAppRoute(host.logger));
  }

  const devices = options.device_auth ? createDeviceServices(host, options.device_auth, telemetry, options.redisKeyPrefix) : undefined;
  const deviceToken = express.Router();
  // No bearer token here: the credentials are in the body, so the body is read unauthenticated, small and with a
  // place among the unauthenticated requests in flight.
  deviceToken.post('/', holdUnauthenticatedPlace(unauthenticated), readJsonBody({ ...jsonLimits, maxBytes: DEVICE_TOKEN_BODY_LIMIT }));
  if (devices) {
    deviceToken.use(createDeviceTokenRoute(devices, telemetry, host.logger));
  } else {
    deviceToken.post('/', (_request, _response, next) => next(new AppError('not_configured', 'Device authentication is not configured on this server.')));
  }
  deviceToken.all('/', methodNotAllowed(['POST']));
  deviceToken.use((request, _response, next) => next(new AppError('not_found', `No route for ${request.method} /account/api/token/device${request.path}.`)));
  deviceToken.use(createOpenAiErrorHandler(host.logger));
  router.use('/account/api/token/device', deviceToken);
  router.use(createGraphqlRoute({ host, devices, limits: { allowIntrospection: options.graphql.introspection }, body: jsonLimits }));
  let closed: Promise<void> | undefined;
  const close = async (graceMs: number): Promise<void> => {
    closing = true;
    const { stopped } = await inFlight.drain(graceMs);
    await recovered;
    await records.close();
    await devices?.close();
    mcpCounts.close();
    registry?.close();
    governance.close();
    journal.close();
    // Last: the turns' own measurements are in. A Medplum server flushes nothing when it stops.
    const telemetryFlushed = await telemetry.flush();
    host.logger?.info('fhirgate closed', { stoppedTurns: stopped, repliesInOutbox: records.pending, telemetryFlushed });
  };
  return Object.assign(router, {
    recovered,
    // Once: a server may call it from more than one shutdown hook (Medplum: preShutdown, and shutdownApp).
    close: ({ graceMs = options.shutdownGraceMs }: { readonly graceMs?: number } = {}): Promise<void> => (closed ??= close(graceMs)),
  });
}
