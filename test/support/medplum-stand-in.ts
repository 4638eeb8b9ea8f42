/**
 * Test support: a stand-in for the parts of a Medplum 5 server the adapter touches, following their contracts
 * (packages/server/src): ES384 access tokens (Medplum 5.1 and later) verified with the issuer pinned and ES256,
 * ES384 or RS256 accepted (oauth/keys.ts),
 * token → Login → membership → project (oauth/utils.ts `getLoginForAccessToken`), a repository bound to the
 * membership and its AccessPolicy (fhir/accesspolicy.ts `getRepoForLogin`; here the standalone host's
 * ProjectRepository), the AsyncLocalStorage request context with Medplum's getters (context.ts), the
 * `authenticateRequest` middleware and the error handler that answers `OperationOutcome` (app.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import {
  OperationOutcomeError,
  Operator,
  badRequest,
  createReference,
  getStatus,
  isResourceType,
  normalizeOperationOutcome,
  unauthorized,
  type WithId,
} from '@medplum/core';
import { FhirRouter, MemoryRepository, type FhirRepository } from '@medplum/fhir-router';
import type { ClientApplication, Login, Practitioner, Project, ProjectMembership, Reference } from '@medplum/fhirtypes';
import type { NextFunction, Request, Response } from 'express';
import { SignJWT, generateKeyPair, jwtVerify, type CryptoKey } from 'jose';
import type { HostLogger } from '../../plugin/host.ts';
import { buildAccessPolicy } from '../../plugin/hosts/standalone/auth/access-policy.ts';
import { loadFhirDefinitions } from '../../plugin/hosts/standalone/fhir-definitions.ts';
import { ProjectRepository } from '../../plugin/hosts/standalone/project-repository.ts';
import type { MedplumRepositoryContext, MedplumServerFunctions } from '../../plugin/hosts/medplum-server.ts';

const ISSUER = 'http://medplum.test/';
const KEY_ID = 'stand-in-key';

/** One logged line. */
export interface LoggedLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
  readonly data?: Record<string, unknown>;
  readonly metadata: Record<string, unknown>;
}

/** Medplum's `RequestContext`: every request has one. */
export class StandInRequestContext {
  readonly requestId: string;
  readonly logger: HostLogger;

  constructor(requestId: string, logger: HostLogger) {
    this.requestId = requestId;
    this.logger = logger;
  }
}

/** What Medplum's `AuthState` holds. */
export interface StandInAuthState {
  /** Basic auth (a ClientApplication's id and secret) has a Login made for the request, without an id. */
  readonly login: Login;
  readonly project: WithId<Project>;
  readonly membership: WithId<ProjectMembership>;
}

/** Medplum's `AuthenticatedRequestContext`: the caller, exposed through getters. */
export class StandInAuthenticatedContext extends StandInRequestContext {
  readonly authState: StandInAuthState;
  readonly repo: FhirRepository;

  constructor(requestId: string, logger: HostLogger, authState: StandInAuthState, repo: FhirRepository) {
    super(requestId, logger);
    this.authState = authState;
    this.repo = repo;
  }

  get project(): WithId<Project> {
    return this.authState.project;
  }

  get membership(): WithId<ProjectMembership> {
    return this.authState.membership;
  }

  get login(): Login {
    return this.authState.login;
  }

  get profile(): Reference {
    return this.membership.profile;
  }
}

/** A project with one practitioner who may sign in. */
export interface StandInProject {
  readonly project: WithId<Project>;
  readonly practitioner: WithId<Practitioner>;
  readonly membership: WithId<ProjectMembership>;
  readonly login: WithId<Login>;
}

/** The stand-in server. */
export interface MedplumStandIn {
  /** The system-level store (Medplum's database). */
  readonly store: MemoryRepository;
  readonly requestContextStore: AsyncLocalStorage<StandInRequestContext>;
  /** What the server passes to `createMedplumServerHost` / `mountFhirgate`. */
  readonly functions: MedplumServerFunctions;
  /** Every context given to `createRepository`, in order. */
  readonly repositoryContexts: MedplumRepositoryContext[];
  readonly logged: LoggedLine[];
  createProject(name: string): Promise<StandInProject>;
  /** A ClientApplication with a secret and a membership in the project (as the Medplum app's Clients page makes one). */
  createClient(project: StandInProject, name: string): Promise<{ readonly client: WithId<ClientApplication>; readonly membership: WithId<ProjectMembership> }>;
  /** An access token as Medplum's `generateAccessToken` makes it. */
  issueAccessToken(login: WithId<Login>, membership: WithId<ProjectMembership>): Promise<string>;
  /** Medplum's `attachRequestContext`. */
  attachRequestContext(request: Request, response: Response, next: NextFunction): Promise<void>;
  /** Medplum's `authenticateRequest`. */
  authenticateRequest(request: Request, response: Response, next: NextFunction): void;
  /** Medplum's global error handler (the part that renders an OperationOutcome). */
  errorHandler(error: unknown, request: Request, response: Response, next: NextFunction): void;
}

/** Creates a stand-in server on an empty in-memory store. */
export async function createMedplumStandIn(): Promise<MedplumStandIn> {
  loadFhirDefinitions();
  const store = new MemoryRepository();
  const requestContextStore = new AsyncLocalStorage<StandInRequestContext>();
  const { privateKey, publicKey } = await generateKeyPair('ES384');
  const repositoryContexts: MedplumRepositoryContext[] = [];
  const logged: LoggedLine[] = [];
  let requestCount = 0;

  const loggerWith = (metadata: Record<string, unknown>): HostLogger => {
    const write = (level: LoggedLine['level']) => (message: string, data?: Record<string, unknown>) => {
      logged.push({ level, message, data, metadata });
    };
    return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
  };

  const getLoginForAccessToken = async (token: string): Promise<StandInAuthState | undefined> => {
    const claims = await verifyJwt(token, publicKey);
    if (!claims) {
      return undefined;
    }
    const login = await readOrUndefined<Login>(store, { reference: `Login/${claims.login_id}` });
    if (!login?.membership || login.revoked) {
      return undefined;
    }
    const membership = await store.readReference<ProjectMembership>(login.membership);
    const project = await store.readReference<Project>(membership.project as Reference<Project>);
    return { login, membership, project };
  };

  // Medplum's getLoginForBasicAuth (oauth/utils.ts): the client read, its secret compared, its membership found.
  const getLoginForBasicAuth = async (token: string): Promise<StandInAuthState | undefined> => {
    const [clientId, secret] = Buffer.from(token, 'base64').toString('ascii').split(':');
    if (!clientId || !secret) {
      return undefined;
    }
    const client = await readOrUndefined<ClientApplication>(store, { reference: `ClientApplication/${clientId}` });
    if (!client?.secret || client.secret !== secret) {
      return undefined;
    }
    const [membership] = await store.searchResources<ProjectMembership>({ resourceType: 'ProjectMembership', filters: [{ code: 'user', operator: Operator.EQUALS, value: `ClientApplication/${client.id}` }] });
    if (!membership) {
      return undefined;
    }
    const project = await store.readReference<Project>(membership.project as Reference<Project>);
    return { login: { resourceType: 'Login', user: createReference(client), authMethod: 'client', authTime: new Date().toISOString() }, membership, project };
  };

  const getRepoForLogin = async (authState: StandInAuthState): Promise<FhirRepository> => {
    const accessPolicy = await buildAccessPolicy(authState.membership, (reference) => store.readReference(reference));
    return new ProjectRepository(store, { projectId: authState.project.id, author: authState.membership.profile, accessPolicy });
  };

  const attachRequestContext = async (request: Request, _response: Response, next: NextFunction): Promise<void> => {
    try {
      requestCount += 1;
      const requestId = `request-${requestCount}`;
      const logger = loggerWith({ requestId });
      const [scheme, token] = (request.headers.authorization ?? '').split(' ');
      const authState = !token ? undefined : scheme === 'Bearer' ? await getLoginForAccessToken(token) : scheme === 'Basic' ? await getLoginForBasicAuth(token) : undefined;
      const context = authState
        ? new StandInAuthenticatedContext(requestId, logger, authState, await getRepoForLogin(authState))
        : new StandInRequestContext(requestId, logger);
      requestContextStore.run(context, () => next());
    } catch (error) {
      next(error);
    }
  };

  const functions: MedplumServerFunctions = {
    tryGetRequestContext: () => requestContextStore.getStore(),
    getProjectSystemRepo: async () => store,
    FhirRouter,
    isResourceType,
    createRepository: (context) => {
      repositoryContexts.push(context);
      // Medplum's Repository constructor appends its synthetic R4 project to `projects`.
      context.projects.push({ resourceType: 'Project', id: 'synthetic-r4-project', name: 'FHIR R4' });
      return new ProjectRepository(store, { projectId: context.projects[0].id, author: context.author, accessPolicy: context.accessPolicy });
    },
    logger: loggerWith({ logger: 'global' }),
    attachRequestContext,
  };


  return {
    store,
    requestContextStore,
    functions,
    repositoryContexts,
    logged,
    createProject: async (name) => {
      // Medplum's repository files a Project under itself (repo.ts getProjectId: a Project's project is its own id).
      const created = await store.createResource<Project>({ resourceType: 'Project', name });
      const project = await store.updateResource<Project>({ ...created, meta: { ...created.meta, project: created.id } });
      const practitioner = await store.createResource<Practitioner>({
        resourceType: 'Practitioner',
        meta: { project: project.id },
        name: [{ given: ['Ada'], family: name }],
      });
      const membership = await store.createResource<ProjectMembership>({
        resourceType: 'ProjectMembership',
        meta: { project: project.id },
        project: createReference(project),
        user: { reference: `User/${practitioner.id}` },
        profile: createReference(practitioner),
      });
      const login = await store.createResource<Login>({
        resourceType: 'Login',
        user: { reference: `User/${practitioner.id}` },
        membership: createReference(membership),
        authMethod: 'password',
        authTime: new Date().toISOString(),
        granted: true,
      });
      return { project, practitioner, membership, login };
    },
    createClient: async (owner, name) => {
      const client = await store.createResource<ClientApplication>({ resourceType: 'ClientApplication', meta: { project: owner.project.id }, name, secret: randomUUID().replaceAll('-', '') });
      const membership = await store.createResource<ProjectMembership>({
        resourceType: 'ProjectMembership',
        meta: { project: owner.project.id },
        project: createReference(owner.project),
        user: createReference(client),
        profile: createReference(client),
      });
      return { client, membership };
    },
    issueAccessToken: (login, membership) =>
      new SignJWT({ login_id: login.id, profile: membership.profile.reference, scope: 'openid', username: login.id })
        .setProtectedHeader({ alg: 'ES384', kid: KEY_ID, typ: 'JWT' })
        .setIssuer(ISSUER)
        .setSubject(login.id)
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(privateKey),
    attachRequestContext,
    authenticateRequest: (_request, _response, next) => {
      next(requestContextStore.getStore() instanceof StandInAuthenticatedContext ? undefined : new OperationOutcomeError(unauthorized));
    },
    errorHandler: (error, _request, response, next) => {
      if (response.headersSent) {
        next(error);
        return;
      }
      const type = (error as { type?: unknown }).type;
      const outcome =
        type === 'entity.parse.failed'
          ? badRequest('Content could not be parsed')
          : type === 'entity.too.large'
            ? badRequest('File too large')
            : normalizeOperationOutcome(error);
      response.status(getStatus(outcome)).json(outcome);
    },
  };
}

// As Medplum's keys.ts: the issuer is required and ES256, ES384 or RS256 accepted; anything else (an HS256 device
// token) is refused.
async function verifyJwt(token: string, publicKey: CryptoKey): Promise<{ login_id: string } | undefined> {
  try {
    const { payload } = await jwtVerify(token, publicKey, { issuer: ISSUER, algorithms: ['ES256', 'ES384', 'RS256'] });
    return typeof payload.login_id === 'string' ? { login_id: payload.login_id } : undefined;
  } catch {
    return undefined;
  }
}

async function readOrUndefined<T extends Login | ClientApplication>(store: FhirRepository, reference: Reference<T>): Promise<WithId<T> | undefined> {
  try {
    return await store.readReference<T>(reference);
  } catch {
    return undefined;
  }
}
