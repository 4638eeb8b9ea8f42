/**
 * The host port: everything fhirgate needs from the Medplum server it is loaded into. The plugin reaches the
 * server only through this interface, so the same plugin code runs in a Medplum server (see
 * `hosts/medplum-server.ts`) and in the standalone host (`hosts/standalone/`).
 */
import type { ProfileResource, WithId } from '@medplum/core';
import type { FhirRepository, FhirRouter } from '@medplum/fhir-router';
import type { AccessPolicy, Device, Login, OperationOutcome, Project, ProjectMembership, Reference } from '@medplum/fhirtypes';
import type { Request } from 'express';

/** The authenticated caller of one request: what Medplum's `getAuthenticatedContext()` gives its own routes. */
export interface CallerContext {
  /** A repository bound to the caller's project and AccessPolicy: every read and write is checked as Medplum checks it. */
  readonly repo: FhirRepository;
  readonly project: WithId<Project>;
  readonly membership: WithId<ProjectMembership>;
  /** The caller's profile, e.g. `Practitioner/123`. */
  readonly profile: Reference<ProfileResource>;
  /**
   * The caller's Login. A ClientApplication's API key (client id and secret, checked on each request as Medplum
   * checks Basic auth) has a Login made for the request alone, without an id, as in Medplum.
   */
  readonly login: Login;
}

/** Structured logger with Medplum's logger methods; `data` never carries secrets or message text at info level. */
export interface HostLogger {
  debug(message: string, data?: Record<string, unknown>): void;
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
  error(message: string, data?: Record<string, unknown>): void;
}

/**
 * The host's Redis client, typed by what fhirgate asks of it (rate-limiter-flexible's calls on an ioredis
 * client, and plain commands), so the client of whichever ioredis major the server runs fits: Medplum 5 hands over
 * ioredis 5's.
 */
export interface HostRedis {
  /** ioredis's connection state; `ready` when commands go through. */
  readonly status: string;
  defineCommand(name: string, definition: { readonly lua: string; readonly numberOfKeys?: number }): void;
  multi(): unknown;
  /** Sends one command (ioredis's `call`), e.g. `call('HSET', key, field, value)`. */
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
}

/**
 * Medplum's FHIR engine as the host runs it: its own copy of `@medplum/fhir-router`, on the StructureDefinitions
 * the host loaded into its own copy of `@medplum/core`. `/graphql` runs on it, so its schema is the server's.
 */
export interface HostFhirEngine {
  /** A new router of the host's `@medplum/fhir-router` (Medplum's `new FhirRouter(options)`). */
  createRouter(options: { readonly introspectionEnabled: boolean }): FhirRouter;
  /** Whether the host's definitions index knows a resource type (Medplum's `isResourceType`); checked at mount. */
  isResourceType(resourceType: string): boolean;
  /**
   * Optional: a router of a partial copy of the host's engine, whose definitions index holds every data type and
   * search parameter of the host's but only the resource types named, so that Medplum's own code builds its GraphQL
   * schema of those types alone, in milliseconds. `/graphql` answers the documents that stay within it from that
   * schema (`graphql/partial-schema.ts`) and needs the host's whole schema only for the others. The standalone
   * host has one; a Medplum server's adapter has none: there the server's schema, which its own `$graphql` uses
   * too, is the only one.
   */
  createPartialRouter?(resourceTypes: readonly string[]): FhirRouter;
  /**
   * Optional: Medplum's `$graphql` on the host's whole schema, run off the event loop that serves the host's
   * requests (the standalone host: a worker process with its own copy of Medplum's engine over the same
   * definitions), each read and write made on the calling thread with the caller's repository. Medplum builds its
   * whole schema at the first request that needs it, in one synchronous call of seconds; `/graphql` sends such
   * requests here, so that the build holds no other request. Without it (a Medplum server), they run on
   * `createRouter`'s router, in-process, on the server's own schema, which the server's own `$graphql` builds and
   * shares.
   */
  readonly offThreadGraphql?: OffThreadGraphql;
}

/** A GraphQL request in Medplum's dialect, for {@link OffThreadGraphql}. */
export interface OffThreadGraphqlRequest {
  readonly query: string;
  readonly operationName?: string;
  readonly variables?: Readonly<Record<string, unknown>>;
  /** Medplum's router option of the same name: whether an introspection query is answered (else 403). */
  readonly introspectionEnabled: boolean;
}

/** Medplum's `$graphql` answered away from the host's event loop; see {@link HostFhirEngine.offThreadGraphql}. */
export interface OffThreadGraphql {
  /**
   * What Medplum's `FhirRouter.handleRequest` answers to `POST $graphql` with this request: an outcome and, when the
   * document ran, its execution result (errors as `Error`s with graphql's `locations`, `path`, `extensions` and
   * `originalError`, the last carrying a Medplum refusal's `outcome`). Every repository call is made with `repo`.
   */
  handleRequest(request: OffThreadGraphqlRequest, repo: FhirRepository): Promise<readonly [OperationOutcome, unknown?]>;
}

/** What the plugin receives from the server that mounts it. */
export interface FhirgateHost {
  /**
   * Authenticates a request from its bearer token, as the server authenticates its own routes, or from a
   * ClientApplication's API key (`Bearer <client id>:<secret>`, or Basic auth: http/client-key.ts), as the server
   * authenticates Basic auth: the caller is then that ClientApplication, under its membership's AccessPolicy.
   * Resolves to undefined when the request carries no valid credential (missing, malformed, expired, revoked, a
   * wrong or rotated secret, or signed by someone else); the plugin answers 401 then.
   */
  authenticate(request: Request): Promise<CallerContext | undefined>;

  /** A repository with system rights inside one project: for records the caller may not write (AuditEvent, the AI agent's Device). */
  getSystemRepo(projectId: string): Promise<FhirRepository>;

  /** A repository for a device acting in a project under the given AccessPolicy, authored as that device. */
  getDeviceRepo(projectId: string, accessPolicy: AccessPolicy, device: Reference<Device>): Promise<FhirRepository>;

  /** Medplum's FHIR engine, with the definitions the host loaded: `/graphql` runs on it. */
  readonly fhir: HostFhirEngine;

  /** The server's Redis client, shared by all instances (Medplum always has one); absent in a single-process host. */
  readonly redis?: HostRedis;

  readonly logger?: HostLogger;

  /** The server's id for this request (Medplum's request context has one), so fhirgate's logs match the server's. */
  requestIdOf?(request: Request): string | undefined;
}
