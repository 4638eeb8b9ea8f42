/**
 * API keys in a Medplum server. Medplum authenticates a ClientApplication's id and secret sent as Basic auth
 * (`getLoginForBasicAuth`, oauth/utils.ts, from `attachRequestContext`): on every request it reads the client,
 * compares the secret and finds its membership. Chat tools that hold one fixed key send it as a bearer token
 * (`Bearer <client id>:<secret>`), which Medplum's bearer path does not accept. On fhirgate's own routes, such a
 * request is given to the server's `attachRequestContext` again as the Basic auth it means, so the caller is
 * exactly the one Medplum makes of that ClientApplication (its AccessPolicy, its FHIR quota), and Medplum's own
 * routes see every request as they always did.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { basicTokenOf, readBearerClientKey } from '../../http/client-key.ts';

/** Medplum's `attachRequestContext` (context.ts), as the server imports it. */
export type AttachRequestContext = (request: Request, response: Response, next: NextFunction) => unknown;

// fhirgate's authenticated routes: `/v1/...`, `/projects/{project_id}/v1/...`, `/graphql`, and the MCP endpoint
// `/mcp` and `/projects/{project_id}/mcp` (itself only: Medplum's own MCP server is under `/mcp/`), under any mount prefix.
const FHIRGATE_ROUTE = /(?:^|\/)(?:v1|projects\/[^/]+\/v1)(?:\/|$)|(?:^|\/)graphql\/?$|(?:^|\/)(?:projects\/[^/]+\/)?mcp\/?$/;

/** Middleware that runs the server's `attachRequestContext` again for a client key on fhirgate's routes. */
export function clientKeyContext(attachRequestContext: AttachRequestContext): RequestHandler {
  return (request, response, next) => {
    const key = FHIRGATE_ROUTE.test(request.path) ? readBearerClientKey(request.headers) : undefined;
    if (!key) {
      next();
      return;
    }
    request.headers.authorization = `Basic ${basicTokenOf(key)}`;
    // Medplum's middleware runs `next` inside the new context's AsyncLocalStorage scope, and reports its own
    // failures to `next(error)`.
    void Promise.resolve(attachRequestContext(request, response, next)).catch(next);
  };
}
