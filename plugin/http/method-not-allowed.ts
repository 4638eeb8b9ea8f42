/**
 * A path fhirgate serves, asked with a method it does not serve: 405 with `Allow`, in the surface's own error
 * body (the renderers set `Allow` from the error's `details.allow`), never the host's own 404 page.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { AppError } from '../errors.ts';

/** Refuses every method but `allowed` on the route it is mounted on (mount it after the route's handlers). */
export function methodNotAllowed(allowed: readonly string[]): RequestHandler {
  return (request: Request, _response: Response, next: NextFunction): void => {
    next(
      new AppError('method_not_allowed', `${request.method} is not allowed on ${request.baseUrl}${request.path}; use ${allowed.join(' or ')}.`, {
        details: { allow: [...allowed] },
      })
    );
  };
}

/** The `Allow` header an error names (a 405), if any. */
export function allowHeaderOf(error: AppError): string | undefined {
  const allow = error.details?.allow;
  return Array.isArray(allow) ? allow.join(', ') : undefined;
}
