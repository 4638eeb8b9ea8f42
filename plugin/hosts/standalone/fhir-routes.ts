/**
 * `/fhir/R4/*` served by Medplum's own `FhirRouter` (REST, batch, `$graphql`) over the caller's repository, so
 * every FHIR call a client makes is checked against its AccessPolicy exactly as the plugin's own writes are.
 * `POST $graphql` goes to the host's GraphQL worker when it has one (`off-thread-graphql.ts`): Medplum's handler
 * there, the same, on a schema built and held away from this thread.
 */
import { getStatus, isOk } from '@medplum/core';
import { FhirRouter, type FhirRepository, type FhirRequest, type HttpMethod } from '@medplum/fhir-router';
import type { OperationOutcome, Resource } from '@medplum/fhirtypes';
import express, { type Request, type Response, type Router } from 'express';
import { AppError } from '../../errors.ts';
import type { CallerContext, HostLogger, OffThreadGraphql } from '../../host.ts';
import { authenticateFirst } from '../../http/authenticate-first.ts';
import { readJsonBody, type BodyLimits } from '../../http/json-body.ts';
import { createOutcomeErrorHandler } from './outcome-errors.ts';
import { answerSchemaRequest } from './schema-request.ts';

const FHIR_JSON = 'application/fhir+json';
// Medplum's JSON_TYPE (app.ts): FHIR JSON and JSON Patch are both `application/*+json`.
const JSON_TYPES = ['application/json', 'application/*+json'];

/** How the FHIR routes are built. */
export interface FhirRoutesOptions {
  /** Resolves the caller of a request from its headers (undefined: none). */
  readonly authenticate: (request: Request) => Promise<CallerContext | undefined>;
  /** The body's bounds: Medplum's `maxJsonSize` (1 MB by default) and a nesting depth. */
  readonly body: Omit<BodyLimits, 'type'>;
  readonly logger?: HostLogger;
  /** Where `POST $graphql` runs instead of this thread, when given. */
  readonly offThreadGraphql?: OffThreadGraphql;
}

/**
 * Creates the `/fhir/R4` router. The caller is resolved from the bearer token before the body is read: a request
 * without a valid token gets Medplum's 401 whatever its body holds, and its body is never parsed.
 */
export function createFhirRoutes(options: FhirRoutesOptions): Router {
  const fhirRouter = new FhirRouter();
  const callers = new WeakMap<Request, CallerContext>();
  const router = express.Router();
  const requireCaller = async (request: Request): Promise<CallerContext> => {
    const caller = callers.get(request) ?? (await options.authenticate(request));
    if (!caller) {
      throw new AppError('unauthenticated', 'Unauthorized');
    }
    callers.set(request, caller);
    return caller;
  };
  router.use(authenticateFirst(requireCaller));
  router.use(readJsonBody({ ...options.body, type: JSON_TYPES }));
  router.use(async (request, response) => {
    const repo = (await requireCaller(request)).repo;
    const schemaAnswer = request.method === 'POST' && request.path === '/$graphql' ? answerSchemaRequest(graphqlQueryOf(request.body)) : undefined;
    if (schemaAnswer) {
      response.json(schemaAnswer);
      return;
    }
    if (options.offThreadGraphql && request.method === 'POST' && request.path === '/$graphql') {
      await handleOffThreadGraphql(options.offThreadGraphql, repo, request, response);
      return;
    }
    await handleFhirRequest(fhirRouter, repo, request, response);
  });
  router.use(createOutcomeErrorHandler(options.logger));
  return router;
}

async function handleFhirRequest(fhirRouter: FhirRouter, repo: FhirRepository, request: Request, response: Response): Promise<void> {
  const fhirRequest: FhirRequest = {
    method: request.method as HttpMethod,
    url: request.url,
    pathname: '',
    params: {},
    query: request.query as FhirRequest['query'],
    body: request.body,
    headers: request.headers,
  };
  const [outcome, resource] = await fhirRouter.handleRequest(fhirRequest, repo);
  if (!resource) {
    sendOutcome(response, outcome);
    return;
  }
  const status = getStatus(outcome);
  if (isOk(outcome) && resource.meta?.versionId) {
    response.set('ETag', `W/"${resource.meta.versionId}"`);
    if (resource.meta.lastUpdated) {
      response.set('Last-Modified', new Date(resource.meta.lastUpdated).toUTCString());
    }
    if (status === 201 && resource.id) {
      response.set('Location', `${request.baseUrl}/${resource.resourceType}/${resource.id}/_history/${resource.meta.versionId}`);
    }
  }
  sendResource(response, status, resource);
}

function graphqlQueryOf(body: unknown): string {
  const query = typeof body === 'object' && body !== null ? (body as Record<string, unknown>).query : undefined;
  return typeof query === 'string' ? query : '';
}

/** As Medplum's `$graphql` route answers: its outcome when the document did not run, else the result as JSON. */
async function handleOffThreadGraphql(engine: OffThreadGraphql, repo: FhirRepository, request: Request, response: Response): Promise<void> {
  const body = (typeof request.body === 'object' && request.body !== null ? request.body : {}) as Record<string, unknown>;
  const [outcome, result] = await engine.handleRequest(
    {
      query: typeof body.query === 'string' ? body.query : '',
      ...(typeof body.operationName === 'string' ? { operationName: body.operationName } : {}),
      ...(typeof body.variables === 'object' && body.variables !== null ? { variables: body.variables as Record<string, unknown> } : {}),
      introspectionEnabled: false,
    },
    repo,
  );
  if (result === undefined) {
    sendOutcome(response, outcome);
    return;
  }
  // As `handleFhirRequest` sends the result of the in-process handler.
  sendResource(response, getStatus(outcome), result as Resource);
}

function sendOutcome(response: Response, outcome: OperationOutcome): void {
  sendResource(response, getStatus(outcome), outcome);
}

function sendResource(response: Response, status: number, resource: Resource): void {
  response.status(status).type(FHIR_JSON).send(JSON.stringify(resource));
}
