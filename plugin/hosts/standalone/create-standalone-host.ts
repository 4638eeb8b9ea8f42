/**
 * The standalone host: a Medplum-compatible server built from Medplum's published packages (FhirRouter,
 * AccessPolicy evaluation) and ours, with fhirgate mounted. `npm start`, every test, the demo and the
 * benchmarks run on it.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isResourceType } from '@medplum/core';
import { FhirRouter, type FhirRepository } from '@medplum/fhir-router';
import express, { type Express } from 'express';
import type { Redis } from 'ioredis';
import { createFhirgatePlugin, type FhirgatePlugin } from '../../create-plugin.ts';
import type { FhirgateHost, HostLogger } from '../../host.ts';
import type { FhirgateOptionsInput } from '../../options.ts';
import { createAccessTokenService, type AccessTokenService } from './auth/access-tokens.ts';
import { authenticateRequest } from './auth/authenticate-request.ts';
import { createCallerCache, type CallerCacheOptions } from './auth/caller-cache.ts';
import { createOAuthRoutes } from './auth/oauth-routes.ts';
import { createPasswordLoginRoutes } from './auth/password-login.ts';
import { DEFAULT_PASSWORD_CHECK_LIMITS, PasswordChecks, type PasswordCheckLimits } from './auth/password-checks.ts';
import { DEFAULT_SIGN_IN_LIMITS, createSignInLimiter, type SignInLimits } from './auth/sign-in-limits.ts';
import { createLimiterStore } from '../../devices/limiter-store.ts';
import { createProjectAdminRoutes } from './admin/project-admin-routes.ts';
import { loadSigningKeys } from './auth/signing-keys.ts';
import { loadFhirDefinitions } from './fhir-definitions.ts';
import { createFhirRoutes } from './fhir-routes.ts';
import { createCapabilityStatementRoute } from './capability-statement.ts';
import { createCorsMiddleware, type AllowedOrigins } from './cors.ts';
import { DEFAULT_TRUST_PROXY, type TrustProxy } from './trust-proxy.ts';
import { createPartialRouter } from './partial-fhir-engine.ts';
import { WorkerGraphqlEngine } from './off-thread-graphql.ts';
import { createJsonLogger } from './logger.ts';
import { ProjectRepository } from './project-repository.ts';
import { createHealthcheck } from './healthcheck.ts';
import { answerNotFound, createOutcomeErrorHandler } from './outcome-errors.ts';
import { createMetricsRoute, registerPrometheusMetrics } from './prometheus-metrics.ts';
import { DEFAULT_MAX_JSON_DEPTH } from '../../http/json-body.ts';
import { DEFAULT_MAX_UNAUTHENTICATED_REQUESTS, UnauthenticatedRequests } from '../../http/unauthenticated-requests.ts';

/** How long an idle keep-alive connection stays open (Node's own default is 5 s). */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;
// After the chat turns are drained, how long other responses may take to finish before their connections close.
const CONNECTION_LINGER_MS = 2000;

/** What a standalone host is built from. */
export interface StandaloneHostOptions {
  /** The system-level store (a SqliteRepository in production use, a MemoryRepository in unit tests). */
  readonly store: FhirRepository;
  /** The public base URL, used as the token issuer, e.g. `http://localhost:8103/`. */
  readonly baseUrl: string;
  readonly redis?: Redis;
  readonly logger?: HostLogger;
  readonly plugin?: FhirgateOptionsInput;
  readonly accessTokenLifetimeSeconds?: number;
  /** How long (default 5 s) and how many resolved callers are kept; `{ ttlMs: 0 }` resolves every request afresh. */
  readonly callerCache?: CallerCacheOptions;
  /**
   * Serve `/metrics` in Prometheus's text format (registers the process's OpenTelemetry meter provider), to a
   * scraper that sends `Authorization: Bearer <bearerToken>` (at least 16 characters); anyone else gets 401.
   */
  readonly metrics?: { readonly bearerToken: string };
  /** Largest JSON body of `/fhir/R4` and `/admin` (Medplum's `maxJsonSize`; default 1 MiB, as Medplum's). */
  readonly maxJsonBytes?: number;
  /** Most arrays and objects a JSON body of the host's own routes may nest (default 64). */
  readonly maxJsonDepth?: number;
  /** Sign-ins and token requests the host works on at once before their caller is known (default 64). */
  readonly maxUnauthenticatedRequests?: number;
  /** Password checks (scrypt) running and waiting at once (auth/password-checks.ts; default: 1 running, 8 waiting up to 1 s). */
  readonly passwordChecks?: Partial<PasswordCheckLimits>;
  /** Failed sign-ins per source and per account before a lockout (auth/sign-in-limits.ts; default 20 and 10 in 5 minutes, 15 minutes). */
  readonly signInLimits?: Partial<SignInLimits>;
  /**
   * Where GraphQL documents that need Medplum's whole schema run (on `/graphql` and `/fhir/R4/$graphql`): in a
   * worker process by default (`off-thread-graphql.ts`), stopped after `idleMs` without one, so the schema's build
   * holds no other request and its memory is given back; `false` runs them in this thread, on the schema this
   * process builds (the host does so when it built it before listening, `FHIRGATE_GRAPHQL_WARMUP=on`).
   */
  readonly graphqlWorker?: false | { readonly idleMs?: number };
  /**
   * Origins of browser applications that may call the host's Medplum routes (`/fhir/`, `/auth/`, `/oauth2/`,
   * `/admin/`, ...) as Medplum's CORS rules allow them (cors.ts); default none.
   */
  readonly allowedOrigins?: AllowedOrigins;
  /**
   * The proxies whose `X-Forwarded-For` sets `request.ip` (Express's `trust proxy`; default `loopback`): the source
   * address of device networks, failed-attempt limits and AuditEvents. Anyone else's header changes nothing.
   */
  readonly trustProxy?: TrustProxy;
}

/** Medplum's default `maxJsonSize` (config/utils.ts): 1 MB. */
export const DEFAULT_MAX_JSON_BYTES = 1024 * 1024;

// How long a client may take to send a whole request (headers and body) before it is answered 408 and closed
// (Node checks every 30 s): a request still arriving may hold a place among the unauthenticated ones. Node's
// default is 300 s.
const REQUEST_TIMEOUT_MS = 30_000;

/** A built host: the Express app, the host port given to the plugin, and the token service (for tools and tests). */
export interface StandaloneHost {
  readonly app: Express;
  readonly host: FhirgateHost;
  readonly plugin: FhirgatePlugin;
  readonly tokens: AccessTokenService;
  readonly store: FhirRepository;
  /** Starts listening; resolves to the bound server and its URL. */
  listen(port: number, hostname?: string): Promise<{ server: Server; url: string }>;
  /**
   * Graceful stop: stops accepting connections, lets chat turns run up to `graceMs` (default: the plugin's
   * `shutdownGraceMs`), stops the rest (recorded `stopped`), then closes the connections that are left.
   */
  close(options?: { readonly graceMs?: number }): Promise<void>;
}

/** Builds the standalone host around a store. */
export async function createStandaloneHost(options: StandaloneHostOptions): Promise<StandaloneHost> {
  loadFhirDefinitions();
  const { store } = options;
  const logger = options.logger ?? createJsonLogger('info');
  const keys = await loadSigningKeys(store);
  const tokens = createAccessTokenService({ keys, issuer: options.baseUrl, lifetimeSeconds: options.accessTokenLifetimeSeconds });
  const callers = createCallerCache(options.callerCache);
  const graphqlWorker = options.graphqlWorker === false ? undefined : new WorkerGraphqlEngine({ idleMs: options.graphqlWorker?.idleMs, logger });
  const host: FhirgateHost = {
    authenticate: (request) => authenticateRequest(request.headers, store, tokens, callers),
    getSystemRepo: async (projectId) => new ProjectRepository(store, { projectId, author: { reference: 'system' } }),
    getDeviceRepo: async (projectId, accessPolicy, device) => new ProjectRepository(store, { projectId, author: device, accessPolicy }),
    fhir: { createRouter: (routerOptions) => new FhirRouter(routerOptions), isResourceType, createPartialRouter, offThreadGraphql: graphqlWorker },
    redis: options.redis,
    logger,
  };
  // The meter provider goes first: the plugin makes its instruments when it is created.
  const metricsRoute = options.metrics ? createMetricsRoute(registerPrometheusMetrics(), options.metrics.bearerToken) : undefined;
  const plugin = createFhirgatePlugin(host, options.plugin);
  const body = { maxBytes: options.maxJsonBytes ?? DEFAULT_MAX_JSON_BYTES, maxDepth: options.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH };
  const unauthenticated = new UnauthenticatedRequests(options.maxUnauthenticatedRequests ?? DEFAULT_MAX_UNAUTHENTICATED_REQUESTS);
  const passwords = new PasswordChecks({ ...DEFAULT_PASSWORD_CHECK_LIMITS, ...options.passwordChecks });
  // Counted in the host's Redis when it has one (shared by its instances), under the plugin's key prefix.
  const signInCounts = createLimiterStore(options.redis, { logger });
  const signInLimits = createSignInLimiter({ ...DEFAULT_SIGN_IN_LIMITS, ...options.signInLimits }, signInCounts, { keyPrefix: options.plugin?.redisKeyPrefix, logger });

  const app = express();
  app.disable('x-powered-by');
  // As Medplum's server (app.ts): no ETag hashed from each body by express. A FHIR read sets its version's itself
  // (fhir-routes.ts); a chat answer is never cached.
  app.set('etag', false);
  app.set('trust proxy', options.trustProxy ?? DEFAULT_TRUST_PROXY);
  const allowedOrigins = options.allowedOrigins ?? [];
  app.use(createCorsMiddleware(allowedOrigins));
  app.get('/healthcheck', createHealthcheck(store, options.redis));
  if (metricsRoute) {
    app.get('/metrics', metricsRoute);
  }
  // Where a Medplum server mounts it (docs/mounting.md): in front of the server's own routes. A chat request reaches
  // it past three layers instead of the host's sign-in, admin and FHIR routes; the host's routes it does not serve
  // pass through it, and its settings route's AuditEvent is recorded here, in front of the admin route that changes them.
  app.use(plugin);
  app.use(createOAuthRoutes({ store, tokens, keys, callers, unauthenticated, maxJsonDepth: body.maxDepth, logger }));
  app.use(createPasswordLoginRoutes(store, { unauthenticated, passwords, limits: signInLimits, maxJsonDepth: body.maxDepth, logger }));
  app.use('/admin/projects', createProjectAdminRoutes(store, { authenticate: host.authenticate, body, logger }));
  // Without authentication, as Medplum's: FHIR clients read it before they sign in.
  app.get('/fhir/R4/metadata', createCapabilityStatementRoute({ baseUrl: options.baseUrl, cors: allowedOrigins === '*' || allowedOrigins.length > 0 }));
  app.use('/fhir/R4', createFhirRoutes({ authenticate: host.authenticate, body, logger, offThreadGraphql: graphqlWorker }));
  // Last: a path nobody serves, and any error no route answered, leave as Medplum's OperationOutcome, never as
  // Express's default page (HTML, and the error, with a body parser's copy of the body, printed to stderr).
  app.use(answerNotFound());
  app.use(createOutcomeErrorHandler(logger));

  const servers: Server[] = [];
  return {
    app,
    host,
    plugin,
    tokens,
    store,
    listen: (port, hostname = '127.0.0.1') =>
      new Promise((resolve, reject) => {
        const server = app.listen(port, hostname, (error?: Error) => {
          if (error) {
            reject(error);
            return;
          }
          // Idle keep-alive connections stay open well past any client's own idle limit (clients such as undici close
          // theirs after a few seconds): a server that closes first races a client sending its next request on the
          // same connection, which then fails with a reset, the request neither answered nor refused. Medplum's server
          // keeps them 90 s for the same reason.
          server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
          server.requestTimeout = REQUEST_TIMEOUT_MS;
          servers.push(server);
          const address = server.address() as AddressInfo;
          resolve({ server, url: `http://${hostname}:${address.port}/` });
        });
      }),
    close: async ({ graceMs } = {}) => {
      const closed = servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve())));
      await plugin.close({ graceMs });
      signInCounts.close();
      // Every chat reply is on record now: idle keep-alive connections go at once, busy ones after a moment.
      servers.forEach((server) => server.closeIdleConnections());
      const lingering = setTimeout(() => servers.forEach((server) => server.closeAllConnections()), CONNECTION_LINGER_MS);
      await Promise.all(closed);
      clearTimeout(lingering);
      await graphqlWorker?.close();
    },
  };
}
