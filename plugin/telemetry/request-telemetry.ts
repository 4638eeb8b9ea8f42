/**
 * Per request of fhirgate's routes: a request id (the host's, the client's `X-Request-Id`, or a new one, sent
 * back in `X-Request-Id`), a span, the duration metric, and one structured log line at the end. Requests for
 * the host's own routes pass through untouched, so mounting fhirgate at the root of a Medplum server changes
 * nothing for Medplum's routes.
 */
import { randomUUID } from 'node:crypto';
import { context, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import type { Request, RequestHandler, Response } from 'express';
import type { HostLogger } from '../host.ts';
import type { Telemetry } from './telemetry.ts';

/** Ids, names and counts a step adds to its request's log line and span: never content, keys or tokens. */
export type RequestAnnotations = Readonly<Record<string, string | number | boolean | undefined>>;

interface RequestScope {
  readonly requestId: string;
  readonly span: Span;
  /** The context with the request's span: what fhirgate's own spans of the request are started in. */
  readonly context: Context;
  annotations: Record<string, string | number | boolean>;
  /** Read when the request ends, for what is only known then. */
  late?: () => RequestAnnotations;
}

/**
 * Where a response keeps its request's scope: a property of its own under a symbol no other code knows (a WeakMap's
 * set and gets cost a turn several µs more, in the ephemeron table the collector also walks).
 */
const SCOPE = Symbol('fhirgate.requestScope');
type ScopedResponse = Response & { [SCOPE]?: RequestScope };

function scopeOf(response: Response): RequestScope | undefined {
  return (response as ScopedResponse)[SCOPE];
}

// A client's request id is echoed into logs: only a short token of safe characters is taken.
const CLIENT_REQUEST_ID = /^[\w.:-]{1,128}$/;

function withoutTrailingSlashes(path: string): string {
  let end = path.length;
  while (end > 0 && path.charCodeAt(end - 1) === SLASH) {
    end--;
  }
  return path.slice(0, end);
}

/** `/projects/{id}/v1...` or `/projects/{id}/mcp` without its `/projects/{id}`; any other path as it is. */
function withoutProject(path: string): string {
  if (!path.startsWith(PROJECTS)) {
    return path;
  }
  const slash = path.indexOf('/', PROJECTS.length);
  if (slash <= PROJECTS.length) {
    return path;
  }
  const rest = path.slice(slash);
  return rest === '/mcp' || rest === '/v1' || rest.startsWith('/v1/') ? rest : path;
}

const SLASH = 0x2f;
const PROJECTS = '/projects/';

/** The fhirgate route a path belongs to, as a low-cardinality `http.route`, or undefined for the host's routes. */
export function routeOf(path: string): string | undefined {
  // The project base URL (`/projects/{project_id}/v1/...`, `.../mcp`) counts as its route: no project id in a label.
  // String steps, no RegExp replace: in a Medplum server's process those are many times slower (bearer-token.ts).
  const normalized = withoutProject(withoutTrailingSlashes(path.toLowerCase()));
  if (normalized === '/mcp') {
    return '/mcp';
  }
  if (normalized === '/v1/chat/completions' || normalized === '/v1/responses' || normalized === '/v1/models' || normalized === '/v1/usage') {
    return normalized;
  }
  if (normalized.startsWith('/v1/models/')) {
    return '/v1/models/{id}';
  }
  if (normalized.startsWith('/v1/responses/')) {
    return '/v1/responses/{id}';
  }
  if (normalized === '/v1' || normalized.startsWith('/v1/')) {
    return '/v1/*';
  }
  if (normalized === '/account/api/token/device') {
    return '/account/api/token/device/';
  }
  if (normalized === '/graphql') {
    return '/graphql';
  }
  return undefined;
}

/** The middleware; mount it first in the plugin's router. */
export function createRequestTelemetry(
  telemetry: Telemetry,
  logger: HostLogger | undefined,
  hostRequestId: ((request: Request) => string | undefined) | undefined
): RequestHandler {
  return (request, response, next) => {
    const route = routeOf(request.path);
    if (!route) {
      next();
      return;
    }
    const started = performance.now();
    const requestId = hostRequestId?.(request) ?? clientRequestId(request) ?? randomUUID();
    response.setHeader('X-Request-Id', requestId);
    const span = telemetry.tracer.startSpan(`${request.method} ${route}`, {
      attributes: { 'http.request.method': request.method, 'http.route': route, 'fhirgate.request_id': requestId },
    });
    const requestContext = trace.setSpan(context.active(), span);
    const scope: RequestScope = { requestId, span, context: requestContext, annotations: {} };
    (response as ScopedResponse)[SCOPE] = scope;

    let finished = false;
    const finish = (): void => {
      if (finished) {
        return;
      }
      finished = true;
      // 499: the client left before any response (nginx's convention); a stream it left keeps its 200.
      const status = response.headersSent ? response.statusCode : 499;
      const seconds = (performance.now() - started) / 1000;
      if (scope.late) {
        annotateRequest(response, scope.late());
      }
      telemetry.requestDuration.record(seconds, { 'http.request.method': request.method, 'http.route': route, 'http.response.status_code': status });
      span.setAttributes({ 'http.response.status_code': status, ...scope.annotations });
      if (status >= 500) {
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
      logger?.info('fhirgate request', {
        requestId,
        method: request.method,
        route,
        status,
        durationMs: Math.round(seconds * 10_000) / 10,
        ...scope.annotations,
      });
    };
    response.once('finish', finish);
    response.once('close', finish);
    // Not enough on its own inside a Medplum server: Express's instrumentation gives each later middleware its
    // parent span back when `next` is called, so fhirgate's spans take `requestContextOf` explicitly.
    context.with(requestContext, next);
  };
}

/** Adds ids and counts to the request's log line and span (see `RequestAnnotations`). */
export function annotateRequest(response: Response, annotations: RequestAnnotations): void {
  const scope = scopeOf(response);
  if (!scope) {
    return;
  }
  for (const key in annotations) {
    const value = annotations[key as keyof RequestAnnotations];
    if (value !== undefined) {
      scope.annotations[key] = value;
    }
  }
}

/**
 * Names the caller on its request's log line and span, as a reference (`Practitioner/<id>`,
 * `ClientApplication/<id>`, `Device/<id>`): who was answered, or refused, without their credential.
 */
export function annotateCaller(request: Request, reference: string): void {
  if (request.res) {
    annotateRequest(request.res, { caller: reference });
  }
}

/** Annotations read when the request ends (a count that grows until then); replaces an earlier one. */
export function annotateRequestAtEnd(response: Response, annotations: () => RequestAnnotations): void {
  const scope = scopeOf(response);
  if (scope) {
    scope.late = annotations;
  }
}

/**
 * The context holding the request's span, for the spans fhirgate starts while serving it (a provider call's
 * `chat <model>`); the active context when the request is not one of fhirgate's routes.
 */
export function requestContextOf(response: Response): Context {
  return scopeOf(response)?.context ?? context.active();
}

/** The request id of a request fhirgate serves, for its other log lines. */
export function requestIdOf(response: Response): string | undefined {
  return scopeOf(response)?.requestId;
}

function clientRequestId(request: Request): string | undefined {
  const value = request.headers['x-request-id'];
  return typeof value === 'string' && CLIENT_REQUEST_ID.test(value) ? value : undefined;
}
