/**
 * The Medplum server adapter: builds fhirgate's host port (`FhirgateHost`) from a Medplum 5 server's own
 * functions, which the server passes in when it mounts the plugin. The functions are typed structurally
 * (`MedplumServerFunctions`), so fhirgate compiles without `@medplum/server`, which is not published.
 *
 * What it matches in Medplum's server (packages/server/src):
 * - Caller: `app.ts` runs `attachRequestContext` (context.ts) for every request, before any router. It reads
 *   the bearer token (`authenticateTokenImpl` → `getLoginForAccessToken`, oauth/middleware.ts and utils.ts),
 *   builds the repository with `getRepoForLogin` (fhir/accesspolicy.ts) and stores an
 *   `AuthenticatedRequestContext` (repo, project, membership, login, profile) in the AsyncLocalStorage
 *   `requestContextStore`; with no valid credential it stores a plain `RequestContext`, and sends nothing.
 *   `authenticate` reads that same context through `tryGetRequestContext()`: the caller is exactly the one
 *   `getAuthenticatedContext()` gives Medplum's own routes (on-behalf-of, SMART scopes and project admin rules
 *   included), and the token is verified once per request, not twice. Medplum's `authenticateRequest`
 *   middleware is not used: it turns a missing context into a 401 `OperationOutcome` through Medplum's error
 *   handler, where the plugin must answer in its own error body.
 * - Device tokens: HS256 with `typ: device+jwt` and `is_device`. Medplum (5.1 and later) signs its own access
 *   tokens ES384 and its `verifyJwt` (oauth/keys.ts) accepts ES256, ES384 and RS256 from its own keys only;
 *   `getLoginForAccessToken` turns the failure into "no login", so Medplum leaves a device's request
 *   unauthenticated; the adapter also refuses them itself before looking at the context.
 * - System repository: Medplum's `getProjectSystemRepo` (fhir/repo.ts) is, in Medplum 5, the global
 *   super-admin repository. It sets `meta.project` only from what the caller writes, so an AuditEvent or Device
 *   created through it would belong to no project. `getSystemRepo` therefore builds a `Repository` (through
 *   `createRepository`) limited to the one project, with no AccessPolicy, authored as `system` as Medplum's
 *   own system repository is; `getProjectSystemRepo` is used only to read the Project, and a Project read is used
 *   again for the repositories made within the next 5 seconds (a turn makes two or three).
 * - Device repository: a `Repository` for the project, authored as the device, under the given AccessPolicy,
 *   with the project's `strictMode`, `checkReferencesOnWrite` and terminology settings, as `getRepoForLogin`
 *   sets them for a login.
 * - GraphQL: the server's own `FhirRouter` class and `isResourceType` (fhir/routes.ts builds its router the same
 *   way; fhir/structure.ts loads the definitions in `initAppServices`, before `initApp` mounts fhirgate), so
 *   `/graphql` runs on the server's definitions whichever copy of `@medplum/*` npm gave fhirgate.
 * - Redis and logs: Medplum's rate-limit Redis client (`getRateLimitRedis`, redis.ts; `getRedis` before 5.1); the
 *   request context's logger (it carries requestId, traceId, projectId) inside a request, the given logger
 *   (`globalLogger`, logger.ts) outside one.
 * - Errors: the server's repository throws its own copy's `OperationOutcomeError`; the plugin reads them by shape
 *   (medplum-errors.ts).
 *
 * Mounting (`mountFhirgate`): in `initApp` (app.ts) right after `app.use(rateLimitHandler(config))` (and so
 * after `attachRequestContext`) and before Medplum's `urlencoded` / `text` / `json` body parsers, so fhirgate's
 * own JSON parser, size limit and error bodies apply to its routes; `close()` from `preShutdown` (index.ts). See
 * docs/mounting.md.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository, FhirRouter } from '@medplum/fhir-router';
import type { AccessPolicy, Project, Reference } from '@medplum/fhirtypes';
import type { Request, RequestHandler } from 'express';
import { looksLikeDeviceToken } from '../devices/device-tokens.ts';
import type { CallerContext, FhirgateHost, HostLogger, HostRedis } from '../host.ts';
import { readBearerToken } from '../http/bearer-token.ts';
import { readClientKey } from '../http/client-key.ts';
import { clientKeyContext, type AttachRequestContext } from './medplum-server/client-key-context.ts';
import { createFhirgatePlugin, type FhirgatePlugin } from '../create-plugin.ts';
import type { FhirgateOptionsInput } from '../options.ts';
import { readAuthenticatedContext, readRequestId, readRequestLogger } from './medplum-server/request-context.ts';

export { readProviderConfigFromEnvironment } from '../llm/provider-config.ts';
export type { FhirgatePlugin } from '../create-plugin.ts';

/**
 * The fields of Medplum's `RepositoryContext` (fhir/repo.ts) that fhirgate sets. `projects` stays a mutable
 * array because Medplum's `Repository` constructor appends its synthetic R4 project to it.
 */
export interface MedplumRepositoryContext {
  /** Written to `meta.author` of every write. */
  readonly author: Reference;
  /** The first is the project every write lands in; reads may also see the others. */
  projects: WithId<Project>[];
  readonly currentProject: WithId<Project>;
  /** Undefined: every resource type of the project (Medplum's protected types excepted). */
  readonly accessPolicy?: AccessPolicy;
  readonly superAdmin: false;
  readonly projectAdmin: boolean;
  readonly strictMode?: boolean;
  readonly extendedMode?: boolean;
  readonly checkReferencesOnWrite?: boolean;
  readonly validateTerminology?: boolean;
}

/** What fhirgate needs from the Medplum server that mounts it: its own functions, passed in as they are. */
export interface MedplumServerFunctions {
  /** Medplum's `tryGetRequestContext` (context.ts): the current request's context, from `requestContextStore`. */
  tryGetRequestContext(): unknown;
  /** Medplum's `getProjectSystemRepo` (fhir/repo.ts); fhirgate only reads the Project with it. */
  getProjectSystemRepo(projectId: string): FhirRepository | Promise<FhirRepository>;
  /** `(context) => new Repository(context)`, Medplum's server repository (fhir/repo.ts). */
  createRepository(context: MedplumRepositoryContext): FhirRepository;
  /**
   * `FhirRouter` of the server's own `@medplum/fhir-router` (the class, as the server imports it): `/graphql` runs on
   * it, so its schema comes from the definitions the server loaded.
   */
  readonly FhirRouter: new (options: { introspectionEnabled?: boolean }) => FhirRouter;
  /** `isResourceType` of the server's own `@medplum/core`: fhirgate checks at mount that the server loaded its definitions. */
  isResourceType(resourceType: string): boolean;
  /**
   * Medplum's Redis client for rate limits: `getRateLimitRedis` (redis.ts, Medplum 5.1 and later; `getRedis` before).
   * Called once, at mount time (after Medplum's `initRedis`). Absent: fhirgate's rate limits are per process.
   */
  getRedis?(): HostRedis;
  /** Medplum's `globalLogger` (logger.ts), for logs outside a request. */
  readonly logger: HostLogger;
  /**
   * Medplum's `attachRequestContext` (context.ts). With it, a ClientApplication's API key sent as a bearer token
   * (`<client id>:<secret>`) is authenticated by Medplum as the Basic auth it means (client-key-context.ts); without
   * it, only Basic auth and access tokens are.
   */
  readonly attachRequestContext?: AttachRequestContext;
}

/** Where the plugin is mounted: Medplum's Express app (typed loosely, so any Express copy fits). */
export interface MountTarget {
  use(handler: RequestHandler): unknown;
}

// Medplum's own system repository is authored as `system`; its writes are not audit-logged as a user's.
const SYSTEM_AUTHOR: Reference = { reference: 'system' };

/** How long a Project read for a repository is used again for the next ones (a turn makes two or three). */
const PROJECT_REUSE_MS = 5_000;
/** Projects kept at most; the oldest go first. */
const PROJECTS_KEPT = 1_000;

/** Builds the host port from a Medplum server's functions. */
export function createMedplumServerHost(server: MedplumServerFunctions): FhirgateHost {
  const readProject = recentProjects(server);
  return {
    authenticate: async (request) => authenticate(server, request),
    getSystemRepo: async (projectId) => {
      const project = await readProject(projectId);
      return server.createRepository({
        ...projectSettings(project),
        author: SYSTEM_AUTHOR,
        projects: [project],
        currentProject: project,
        superAdmin: false,
        projectAdmin: true,
        extendedMode: true,
      });
    },
    getDeviceRepo: async (projectId, accessPolicy, device) => {
      const project = await readProject(projectId);
      return server.createRepository({
        ...projectSettings(project),
        author: device,
        projects: [project],
        currentProject: project,
        accessPolicy,
        superAdmin: false,
        projectAdmin: false,
      });
    },
    fhir: {
      createRouter: (options) => new server.FhirRouter(options),
      isResourceType: (resourceType) => server.isResourceType(resourceType),
    },
    redis: server.getRedis?.(),
    logger: createRequestAwareLogger(server),
    requestIdOf: () => readRequestId(server.tryGetRequestContext()),
  };
}

/** Creates the plugin on a Medplum server and mounts it at the root of its app; returns it for `close()` at shutdown. */
export function mountFhirgate(app: MountTarget, server: MedplumServerFunctions, options?: FhirgateOptionsInput): FhirgatePlugin {
  const plugin = createFhirgatePlugin(createMedplumServerHost(server), options);
  if (server.attachRequestContext) {
    app.use(clientKeyContext(server.attachRequestContext));
  }
  app.use(plugin);
  return plugin;
}

/**
 * The caller Medplum's `attachRequestContext` resolved for this request, or undefined when the request
 * carries no valid credential (missing, malformed, expired, revoked, a device token, a wrong client secret). A
 * client key is Basic auth by then (client-key-context.ts); Medplum checked its secret.
 */
function authenticate(server: MedplumServerFunctions, request: Request): CallerContext | undefined {
  const token = readBearerToken(request.headers);
  if (token ? looksLikeDeviceToken(token) : !readClientKey(request.headers)) {
    return undefined;
  }
  const context = server.tryGetRequestContext();
  if (context === undefined) {
    // Not a credential problem but a mounting one: every caller would get 401 with a valid token. Failing
    // loudly (500, logged) points at the cause.
    throw new Error('fhirgate found no Medplum request context: mount it after attachRequestContext (see docs/mounting.md).');
  }
  return readAuthenticatedContext(context);
}

/**
 * Reads a Project for the repositories made with it, and uses the read again for those made within
 * PROJECT_REUSE_MS: a chat turn's repositories (the AI agent's for its reply, the system's for an AuditEvent) then
 * cost the server no Project read each. The Project's repository settings (`strictMode`, `checkReferencesOnWrite`,
 * terminology) so apply to fhirgate's writes within seconds of a change, as a restart-free setting should; a failed
 * read is not kept.
 */
function recentProjects(server: MedplumServerFunctions): (projectId: string) => Promise<WithId<Project>> {
  const recent = new Map<string, { readonly at: number; readonly project: Promise<WithId<Project>> }>();
  return (projectId) => {
    const now = Date.now();
    const kept = recent.get(projectId);
    if (kept && now - kept.at < PROJECT_REUSE_MS) {
      return kept.project;
    }
    const project = (async () => (await server.getProjectSystemRepo(projectId)).readResource<Project>('Project', projectId))();
    recent.delete(projectId);
    recent.set(projectId, { at: now, project });
    project.catch(() => {
      if (recent.get(projectId)?.project === project) {
        recent.delete(projectId);
      }
    });
    if (recent.size > PROJECTS_KEPT) {
      const oldest = recent.keys().next().value;
      if (oldest !== undefined) {
        recent.delete(oldest);
      }
    }
    return project;
  };
}

/** The project's repository settings, as Medplum's `getRepoForLogin` takes them from the Project. */
function projectSettings(project: Project): Pick<MedplumRepositoryContext, 'strictMode' | 'checkReferencesOnWrite' | 'validateTerminology'> {
  return {
    strictMode: project.strictMode,
    checkReferencesOnWrite: project.checkReferencesOnWrite,
    validateTerminology: project.features?.includes('validate-terminology'),
  };
}

function createRequestAwareLogger(server: MedplumServerFunctions): HostLogger {
  const current = (): HostLogger => readRequestLogger(server.tryGetRequestContext()) ?? server.logger;
  return {
    debug: (message, data) => current().debug(message, data),
    info: (message, data) => current().info(message, data),
    warn: (message, data) => current().warn(message, data),
    error: (message, data) => current().error(message, data),
  };
}
