/**
 * `/fhir/R4/*` served by Medplum's own `FhirRouter` (REST, batch, `$graphql`) over the caller's repository, so
 * every FHIR call a client makes is checked against its AccessPolicy exactly as the plugin's own writes are.
 */
import { OperationOutcomeError, getStatus, isOk, normalizeOperationOutcome, unauthorized } from '@medplum/core';
import { FhirRouter, type FhirRepository, type FhirRequest, type HttpMethod } from '@medplum/fhir-router';
import type { OperationOutcome, Resource } from '@medplum/fhirtypes';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { CallerContext } from '../../host.ts';
import { outcomeOf } from '../../medplum-errors.ts';

const FHIR_JSON = 'application/fhir+json';

/** Creates the `/fhir/R4` router; `authenticate` resolves the caller of each request. */
export function createFhirRoutes(authenticate: (request: Request) => Promise<CallerContext | undefined>): Router {
  const fhirRouter = new FhirRouter();
  const router = express.Router();
  router.use(express.json({ type: [FHIR_JSON, 'application/json', 'application/json-patch+json'], limit: '16mb' }));
  router.use(async (request, response) => {
    const caller = await authenticate(request);
    if (!caller) {
      sendOutcome(response, unauthorized);
      return;
    }
    await handleFhirRequest(fhirRouter, caller.repo, request, response);
  });
  router.use((error: unknown, _request: Request, response: Response, next: NextFunction) => {
    if (response.headersSent) {
      next(error);
      return;
    }
    sendOutcome(response, outcomeOf(error) ?? normalizeOperationOutcome(toBadBody(error)));
  });
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

function sendOutcome(response: Response, outcome: OperationOutcome): void {
  sendResource(response, getStatus(outcome), outcome);
}

function sendResource(response: Response, status: number, resource: Resource): void {
  response.status(status).type(FHIR_JSON).send(JSON.stringify(resource));
}

function toBadBody(error: unknown): OperationOutcomeError | unknown {
  const type = typeof error === 'object' && error !== null && 'type' in error ? (error as { type: unknown }).type : undefined;
  if (type === 'entity.parse.failed') {
    return new OperationOutcomeError({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'invalid', details: { text: 'The request body is not valid JSON.' } }],
    });
  }
  if (type === 'entity.too.large') {
    return new OperationOutcomeError({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'too-costly', details: { text: 'The request body is too large.' } }],
    });
  }
  return error;
}
