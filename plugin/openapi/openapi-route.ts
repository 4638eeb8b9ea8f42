/**
 * `GET /v1/openapi.json` and `GET /fhirgate/openapi.json`: the OpenAPI description, unauthenticated (it describes
 * the API, not any project's data), so API tools and client generators can read it from the server itself. Not at
 * `/openapi.json`: a Medplum server serves its own FHIR API's description there.
 */
import express, { type Router } from 'express';
import type { HostLogger } from '../host.ts';
import { methodNotAllowed } from '../http/method-not-allowed.ts';
import { createOpenAiErrorHandler } from '../http/openai-error-response.ts';
import { buildOpenApiDocument, OPENAPI_PATHS } from './openapi-document.ts';
import { PROJECT_BASE_PATH } from '../chat/authenticate-caller.ts';

/** The route; the document is built once, here. */
export function createOpenApiRoute(logger: HostLogger | undefined): Router {
  const body = JSON.stringify(buildOpenApiDocument());
  const router = express.Router();
  // Also under the project base URL, where a client configured with it looks for the description.
  const paths = [...OPENAPI_PATHS, `${PROJECT_BASE_PATH}/openapi.json`];
  // One route for every path: a request for another path is told apart in one match, not one per path and method.
  router
    .route(paths)
    .get((_request, response) => {
      response.type('application/json').send(body);
    })
    .all(methodNotAllowed(['GET']));
  router.use(paths, createOpenAiErrorHandler(logger));
  return router;
}
