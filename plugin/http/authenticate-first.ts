/**
 * Authentication before the body: a route with a bearer token checks it, from the headers alone, before a byte of
 * the body is read or parsed, so a caller without a valid token costs a token check and nothing more, whatever it
 * sends. Inside a Medplum server the caller was already resolved from Medplum's request context; in the standalone
 * host the token is verified here. The caller is resolved once per request: the route's own steps that ask again
 * (the chat pipeline's step 1) get the same answer without a second check.
 */
import type { Request, RequestHandler } from 'express';
import type { CallerContext, FhirgateHost } from '../host.ts';

/** The host, with `authenticate` resolved at most once per request. */
export function authenticatingOncePerRequest(host: FhirgateHost): FhirgateHost {
  const callers = new WeakMap<Request, Promise<CallerContext | undefined>>();
  const authenticate = (request: Request): Promise<CallerContext | undefined> => {
    let caller = callers.get(request);
    if (!caller) {
      caller = host.authenticate(request);
      callers.set(request, caller);
    }
    return caller;
  };
  return {
    authenticate,
    getSystemRepo: (projectId) => host.getSystemRepo(projectId),
    getDeviceRepo: (projectId, accessPolicy, device) => host.getDeviceRepo(projectId, accessPolicy, device),
    fhir: host.fhir,
    redis: host.redis,
    logger: host.logger,
    ...(host.requestIdOf ? { requestIdOf: (request: Request) => host.requestIdOf?.(request) } : {}),
  };
}

/**
 * Middleware that runs `authenticate` (which throws the surface's 401 or 403) before the next handler, typically
 * the body parser; a refused request goes to the route's error handler with its body unread.
 */
export function authenticateFirst(authenticate: (request: Request) => Promise<unknown>): RequestHandler {
  return async (request, _response, next) => {
    await authenticate(request);
    next();
  };
}
