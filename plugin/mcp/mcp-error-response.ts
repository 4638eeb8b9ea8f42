/**
 * The MCP endpoint's one error shape, for what fails before the SDK answers (authentication, the body, the
 * project's settings, a store failure): the HTTP status from fhirgate's table and a JSON-RPC error body, the
 * shape MCP clients read, with the AppError's code in `data`. Never a stack trace: unknown failures are
 * `internal_error` in general words, and their cause goes to the log.
 */
import type { Response } from 'express';
import { toAppError } from '../errors.ts';
import type { HostLogger } from '../host.ts';
import { fromBodyParserError, isNotJsonError } from '../http/json-body.ts';

// JSON-RPC's codes: a body that is not JSON, a request the server will not take, or a failure of the server's own.
const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const INTERNAL_ERROR = -32603;

/** Sends `thrown` as the MCP endpoint's error; a 401 carries the challenge naming the protected-resource metadata. */
export function sendMcpError(response: Response, thrown: unknown, options: { readonly resourceMetadata?: string; readonly logger?: HostLogger }): void {
  const error = toAppError(fromBodyParserError(thrown) ?? thrown);
  if (error.status >= 500 && error.code !== 'unavailable') {
    options.logger?.error('MCP request failed', { code: error.code, cause: error.cause instanceof Error ? `${error.cause.name}: ${error.cause.message}` : undefined });
  }
  if (response.headersSent) {
    response.end();
    return;
  }
  if (error.retryAfterSeconds !== undefined) {
    response.setHeader('Retry-After', String(Math.ceil(error.retryAfterSeconds)));
  }
  if (error.status === 401 && options.resourceMetadata) {
    response.setHeader('WWW-Authenticate', `Bearer resource_metadata="${options.resourceMetadata}"`);
  }
  response.status(error.status).json({
    jsonrpc: '2.0',
    id: null,
    error: { code: error.status >= 500 ? INTERNAL_ERROR : isNotJsonError(error) ? PARSE_ERROR : INVALID_REQUEST, message: error.message, data: { code: error.code } },
  });
}
