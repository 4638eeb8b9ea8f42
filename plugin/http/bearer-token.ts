import type { IncomingHttpHeaders } from 'node:http';

/** The bearer token of a request, or undefined when the Authorization header carries none. */
export function readBearerToken(headers: IncomingHttpHeaders): string | undefined {
  const header = headers.authorization;
  if (!header) {
    return undefined;
  }
  const [scheme, token, ...rest] = header.trim().split(/\s+/);
  return scheme?.toLowerCase() === 'bearer' && token && rest.length === 0 ? token : undefined;
}
