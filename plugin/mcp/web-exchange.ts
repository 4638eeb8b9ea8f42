/**
 * Express to web-standard and back, for the SDK's fetch-shaped handler: the request's method, URL and headers
 * (its body already parsed by the route, handed over as `parsedBody` and as bytes), and the answer written back
 * as it comes, so an SSE answer streams.
 */
import type { Request, Response } from 'express';

/** The request as a web `Request`; aborted with `signal` when the client goes. */
export function toWebRequest(request: Request, signal: AbortSignal): globalThis.Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) {
      headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
  }
  const url = `${request.protocol}://${request.get('host') ?? 'localhost'}${request.originalUrl}`;
  const body = request.method === 'POST' ? JSON.stringify(request.body ?? null) : undefined;
  if (body !== undefined) {
    headers.set('content-type', 'application/json');
    headers.delete('content-length');
  }
  return new globalThis.Request(url, { method: request.method, headers, body, signal });
}

/** Writes a web `Response` to Express, streaming its body. */
export async function sendWebResponse(answer: globalThis.Response, response: Response): Promise<void> {
  response.status(answer.status);
  answer.headers.forEach((value, name) => response.setHeader(name, value));
  if (!answer.body) {
    response.end();
    return;
  }
  response.flushHeaders();
  for await (const chunk of answer.body) {
    response.write(chunk);
  }
  response.end();
}
