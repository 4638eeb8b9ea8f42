/**
 * Cross-origin requests as Medplum's server answers them (its `cors.ts`, on the `cors` package): a browser
 * application served from another origin may call the host's Medplum routes when its origin is allowed. An allowed
 * origin is echoed with credentials, the headers a client reads exposed, and a preflight (`OPTIONS`) answered 204
 * with the methods and the headers the browser asked for, cached 10 minutes; anyone else gets no CORS header, so
 * the browser keeps the answer from the page. Only Medplum's paths take part (`/fhir/`, `/auth/`, `/oauth2/`,
 * `/admin/`, `/.well-known/`, ...): fhirgate's own routes (`/v1`, `/graphql`) answer cross-origin requests in a
 * Medplum server no more than here.
 */
import type { RequestHandler } from 'express';

/** Origins a browser application may call the host from: `*` for any, else exact origins (`scheme://host[:port]`). */
export type AllowedOrigins = '*' | readonly string[];

// Medplum's list (cors.ts `prefixes`), whether or not this host serves each.
const PATH_PREFIXES = [
  '/.well-known/',
  '/admin/',
  '/auth/',
  '/cds-services',
  '/dicomweb/',
  '/email/',
  '/fhir/',
  '/fhircast/',
  '/hub',
  '/api/hub',
  '/oauth2/',
  '/keyvalue/',
  '/shl/',
  '/storage/',
];
const EXPOSED_HEADERS = 'Content-Location,ETag,Last-Modified,Location,RateLimit';
// The `cors` package's defaults, which Medplum keeps.
const ALLOWED_METHODS = 'GET,HEAD,PUT,PATCH,POST,DELETE';
const PREFLIGHT_MAX_AGE_SECONDS = '600';

/** The CORS middleware for `allowedOrigins` (an empty list: none, every answer as before). */
export function createCorsMiddleware(allowedOrigins: AllowedOrigins): RequestHandler {
  const isAllowed = (origin: string): boolean => allowedOrigins === '*' || allowedOrigins.includes(origin);
  return (request, response, next) => {
    const origin = request.headers.origin;
    if (!origin || !isAllowed(origin) || !PATH_PREFIXES.some((prefix) => request.path.startsWith(prefix))) {
      next();
      return;
    }
    response.setHeader('Access-Control-Allow-Origin', origin);
    response.vary('Origin');
    response.setHeader('Access-Control-Allow-Credentials', 'true');
    response.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    if (request.method !== 'OPTIONS') {
      next();
      return;
    }
    response.setHeader('Access-Control-Allow-Methods', ALLOWED_METHODS);
    const requestedHeaders = request.headers['access-control-request-headers'];
    if (requestedHeaders) {
      response.setHeader('Access-Control-Allow-Headers', requestedHeaders);
    }
    response.vary('Access-Control-Request-Headers');
    response.setHeader('Access-Control-Max-Age', PREFLIGHT_MAX_AGE_SECONDS);
    response.status(204).setHeader('Content-Length', '0');
    response.end();
  };
}

/**
 * Reads `FHIRGATE_ALLOWED_ORIGINS`: `*`, or origins separated by commas. An entry that is not exactly an origin
 * (a path, a trailing slash) would never match a browser's `Origin` header, so it is an error naming the origin to
 * write instead.
 */
export function parseAllowedOrigins(text: string | undefined, variable: string): AllowedOrigins {
  const value = text?.trim() ?? '';
  if (value === '*') {
    return '*';
  }
  const entries = value.split(',').map((entry) => entry.trim()).filter(Boolean);
  for (const entry of entries) {
    const origin = URL.parse(entry)?.origin;
    if (!origin || origin === 'null') {
      throw new Error(`${variable}: '${entry}' is not an origin; write it as scheme://host[:port], e.g. http://localhost:3000`);
    }
    if (origin !== entry) {
      throw new Error(`${variable}: '${entry}' is not an origin (a browser sends no path or trailing slash); write ${origin}`);
    }
  }
  return entries;
}
