/**
 * `POST /graphql`: the spec's device dialect (and Medplum's own) on Medplum's GraphQL engine, step by step:
 *   1. authenticate, from the headers alone: a device token, or a user's Medplum token  → 401 / 403
 *      (a device must come from its allowed networks → 403, on record as a refusal; it is also rate limited → 429,
 *      and must still be an active Device)
 *   2. read the body, within its size and depth (one request; batching is off)          → 400 / 413
 *   3. translate the document to Medplum's dialect, within fhirgate's limits (planned once per document text)
 *   4. for a device: a document naming only its Observations and its Device (`device-document-scope.ts`, before
 *      any schema is built or read), and only Observation writes that name the device itself, linked to its
 *      Device, about its assigned patient (Device.patient), itself or no one → else FORBIDDEN
 *      (what the document allows is planned once per document; each request's values are checked)
 *   5. for a device: each mutation of the document takes one unit of its rate limit, all before any runs → 429
 *   6. execute with the caller's repository (its AccessPolicy decides), answer 200 with data and/or errors;
 *      a document Medplum's handler already validated runs on a schema pruned to it, unvalidated (the fast path);
 *      one that needs Medplum's whole schema runs off the event loop where the host offers it
 * Errors are GraphQL errors with `extensions.code`; transport failures keep their HTTP status.
 */
import type { FhirRepository } from '@medplum/fhir-router';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { authenticateCaller } from '../chat/authenticate-caller.ts';
import type { DeviceServices } from '../devices/device-services.ts';
import { looksLikeDeviceToken } from '../devices/device-tokens.ts';
import { AppError, toAppError } from '../errors.ts';
import type { FhirgateHost } from '../host.ts';
import { readBearerToken } from '../http/bearer-token.ts';
import { fromBodyParserError, readJsonBody, type BodyLimits } from '../http/json-body.ts';
import { checkDeviceDocumentScope } from './device-document-scope.ts';
import { extraMutationUnits } from './device-mutation-budget.ts';
import { guardDeviceWrites } from './device-write-guard.ts';
import type { DocumentLimits } from './document-limits.ts';
import { executeGraphql } from './execute-graphql.ts';
import { FastGraphqlPath } from './fast-graphql-path.ts';
import { parseGraphqlRequestBody, type MedplumGraphqlRequest } from './graphql-request.ts';
import { renderGraphqlError, sendGraphqlError } from './graphql-response.ts';
import { DocumentTranslator } from './translate-document.ts';
import { annotateCaller, annotateRequest, requestIdOf } from '../telemetry/request-telemetry.ts';
import { methodNotAllowed } from '../http/method-not-allowed.ts';

/** The resource types of the host's partial engine: the spec's device documents write Observations. */
const DEVICE_RESOURCE_TYPES: readonly string[] = ['Observation'];

/** What the route is built from. */
export interface GraphqlRouteOptions {
  readonly host: FhirgateHost;
  /** Absent when `device_auth` is not configured: device tokens are then refused. */
  readonly devices?: DeviceServices;
  readonly limits: DocumentLimits;
  /** The body's size and depth bounds. */
  readonly body: BodyLimits;
}

/** The route, mounted at the plugin's root. */
export function createGraphqlRoute(options: GraphqlRouteOptions): Router {
  const router = express.Router();
  // The host's own engine: its schema is built from the definitions the server loaded, not from a copy of ours.
  const engine = options.host.fhir.createRouter({ introspectionEnabled: options.limits.allowIntrospection === true });
  const fastPath = new FastGraphqlPath(engine, {
    // What devices write: their documents are answered without Medplum's whole schema where the host can.
    partialRouter: options.host.fhir.createPartialRouter?.(DEVICE_RESOURCE_TYPES),
    onUnavailable: (reason) => options.host.logger?.warn('GraphQL fast path unavailable', { reason }),
    // Once per distinct document, and only at debug: the document is still answered, by Medplum's handler.
    onUnsupportedDocument: (reason) => options.host.logger?.debug('GraphQL document left to Medplum\'s handler', { reason }),
    // Where the host has one: documents that need Medplum's whole schema run there, never holding this thread.
    offThread: options.host.fhir.offThreadGraphql,
    introspectionEnabled: options.limits.allowIntrospection === true,
  });
  const translator = new DocumentTranslator(options.limits);
  // The caller is known before the body is read: without a valid token, a 401 and nothing read.
  const callers = new WeakMap<Request, AuthenticatedGraphqlCaller>();
  const resolveCallerFirst = async (request: Request, _response: Response, next: NextFunction): Promise<void> => {
    callers.set(request, await authenticate(options, request));
    next();
  };
  router.post('/graphql', resolveCallerFirst, readJsonBody(options.body), async (request, response) => {
    const body = parseGraphqlRequestBody(request.body);
    const caller = callers.get(request) ?? (await authenticate(options, request));
    let prepared: PreparedRequest;
    try {
      prepared = caller.prepare(translator.translate(body));
    } catch (error) {
      // An error in the document itself (syntax, limits, a write the device may not make): 200 with errors, as
      // GraphQL over HTTP asks for a well-formed request; nothing was executed.
      annotateRequest(response, { code: toAppError(error).code });
      response.json(renderGraphqlError(error));
      return;
    }
    // Over the device's budget is the rate limit's 429 (with Retry-After), as at authentication; nothing runs.
    if (prepared.extraUnits > 0) {
      await caller.spend(prepared.extraUnits);
    }
    response.json(await executeGraphql(engine, caller.repo, prepared.request, fastPath));
  });
  router.all('/graphql', methodNotAllowed(['POST']));
  router.use('/graphql', renderError(options.host));
  return router;
}

/** A translated request as the caller's kind leaves it, and what it costs beyond the request itself. */
interface PreparedRequest {
  readonly request: MedplumGraphqlRequest;
  /** Units of the caller's rate limit the document takes beyond the one its request took (a device's mutations). */
  readonly extraUnits: number;
}

interface AuthenticatedGraphqlCaller {
  readonly repo: FhirRepository;
  /** What the caller's kind adds to a translated request: the device's scope, write guard and mutation count, or nothing. */
  readonly prepare: (request: MedplumGraphqlRequest) => PreparedRequest;
  /** Takes `units` more from the caller's rate limit; throws `rate_limited` when they do not fit. */
  readonly spend: (units: number) => Promise<void>;
}

async function authenticate(options: GraphqlRouteOptions, request: Request): Promise<AuthenticatedGraphqlCaller> {
  const token = readBearerToken(request.headers);
  if (!token || !looksLikeDeviceToken(token)) {
    const caller = await authenticateCaller(options.host, request);
    return { repo: caller.repo, prepare: (translated) => ({ request: translated, extraUnits: 0 }), spend: async () => undefined };
  }
  const devices = options.devices;
  const claims = devices ? await devices.tokens.verify(token) : undefined;
  if (!devices || !claims) {
    throw new AppError('unauthenticated', 'Missing, invalid or expired device token.');
  }
  annotateCaller(request, `Device/${claims.deviceResourceId}`);
  // A token carried off the ward is refused as its key would be; Express's `request.ip` honours only trusted proxies.
  if (!devices.config.networks.allows(claims.deviceId, request.ip)) {
    const attempt = {
      deviceId: claims.deviceId,
      identifierSystem: devices.config.identifierSystem,
      device: { reference: `Device/${claims.deviceResourceId}` },
      sourceAddress: request.ip,
    };
    await devices.recordRefusal(attempt, 'outside_network');
    throw new AppError('forbidden', 'The device token is not accepted from this network.');
  }
  await devices.rateLimiter.consume(claims.deviceId);
  const device = await devices.readDevice(claims.deviceResourceId);
  const identifierSystem = devices.config.identifierSystem;
  const stillNamed = device?.identifier?.some((identifier) => identifier.system === identifierSystem && identifier.value === claims.deviceId);
  if (!device || device.status !== 'active' || !stillNamed) {
    throw new AppError('unauthenticated', 'The device token is no longer valid: its Device is gone, renamed or not active.');
  }
  // Read on every request, as the Device is: an operator's reassignment applies to the device's next request.
  const assignedPatientId = (await devices.findAssignedPatient(device))?.id;
  const caller = {
    deviceId: claims.deviceId,
    deviceResourceId: claims.deviceResourceId,
    identifierSystem,
    assignedPatient: assignedPatientId ? `Patient/${assignedPatientId}` : undefined,
  };
  const isResourceType = (name: string): boolean => options.host.fhir.isResourceType(name);
  return {
    repo: await devices.deviceRepo(claims.deviceResourceId, assignedPatientId),
    prepare: (translated) => {
      checkDeviceDocumentScope(translated.document, isResourceType);
      const guarded = guardDeviceWrites(translated, caller);
      return { request: guarded, extraUnits: extraMutationUnits(guarded, devices.rateLimiter.perSecond) };
    },
    spend: (units) => devices.rateLimiter.consume(claims.deviceId, units),
  };
}

// Failures before the document is looked at (the body, authentication, the rate limit) leave as GraphQL errors
// with their HTTP status: 400, 401, 403, 413, 429.
function renderError(host: FhirgateHost) {
  return (thrown: unknown, _request: Request, response: Response, next: NextFunction): void => {
    if (response.headersSent) {
      next(thrown);
      return;
    }
    const error = toAppError(fromBodyParserError(thrown) ?? thrown);
    if (error.status >= 500) {
      host.logger?.error('GraphQL request failed', {
        requestId: requestIdOf(response),
        code: error.code,
        cause: error.cause instanceof Error ? error.cause.name : undefined,
      });
    }
    sendGraphqlError(response, error);
  };
}
