/**
 * `POST /account/api/token/device/`: a pre-registered API key for a short-lived device token, step by step:
 *   1. read the body                          → 400 with the spec's error body
 *   2. check the key (constant time)          → 403, the same for an unknown device and a wrong key; a failure is
 *                                               counted by source address and by device id, and past either
 *                                               limit it is a 429 (the lockout; the right key still passes)
 *   3. the source address, from the device's allowed networks → 403, the same as a wrong key (nothing revealed)
 *   4. count the request against the device   → 429 with Retry-After (only the device's own requests count)
 *   5. map the device to its FHIR Device      → 403 when there is none, or it is not active
 *   6. record the AuditEvent, issue the token → 200 {access, expires_in}
 * Every refusal after step 1 is on record: the first ones of each source as AuditEvents of their own, the rest in
 * a summary per source and period (refusal-audit.ts). No bearer token is read here. The source address is Express's
 * `request.ip`: the peer, or what the proxies the host trusts (`trust proxy`) forwarded, never a header read here.
 */
import type { Device, Reference } from '@medplum/fhirtypes';
import express, { type Router } from 'express';
import { z } from 'zod';
import { AppError } from '../errors.ts';
import type { HostLogger } from '../host.ts';
import { buildTokenIssuedEvent, type DeviceAuthAttempt, type DeviceAuthFailure } from './device-audit.ts';
import type { DeviceServices } from './device-services.ts';
import { annotateRequest, requestIdOf } from '../telemetry/request-telemetry.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';

/** The request body's schema; the OpenAPI description is generated from it too (plugin/openapi/). */
export const tokenRequestSchema = z.object({
  device_id: z.string().min(1).max(128),
  api_key: z.string().min(1).max(4096),
});

/** The same answer for an unknown device and a wrong key, so neither can be told from the other. */
const INVALID_CREDENTIALS = 'Invalid device credentials.';

/** The route, mounted at `/account/api/token/device` (with or without the trailing slash). */
export function createDeviceTokenRoute(services: DeviceServices, telemetry: Telemetry, logger: HostLogger | undefined): Router {
  const router = express.Router();
  router.post('/', async (request, response) => {
    const body = readTokenRequest(request.body);
    annotateRequest(response, { deviceId: body.device_id });
    const attempt: DeviceAuthAttempt = {
      deviceId: body.device_id,
      identifierSystem: services.config.identifierSystem,
      sourceAddress: request.ip,
    };
    const refuse = async (reason: DeviceAuthFailure, error: AppError, device?: Reference<Device>): Promise<never> => {
      annotateRequest(response, { refusal: reason });
      await services.recordRefusal({ ...attempt, device }, reason);
      throw error;
    };

    if (!services.checkKey(body.device_id, body.api_key)) {
      const lockout = await services.failedAttempts.count({ sourceAddress: request.ip, deviceId: body.device_id });
      if (lockout) {
        return refuse('too_many_failures', lockout);
      }
      const known = services.config.validKeys.has(body.device_id);
      return refuse(known ? 'wrong_key' : 'unknown_device', new AppError('forbidden', INVALID_CREDENTIALS));
    }
    // After the key: a refusal with the right key from elsewhere is told apart on record (a key copied off the ward).
    if (!services.config.networks.allows(body.device_id, request.ip)) {
      return refuse('outside_network', new AppError('forbidden', INVALID_CREDENTIALS));
    }
    try {
      await services.rateLimiter.consume(body.device_id);
    } catch (error) {
      if (AppError.isInstance(error) && error.code === 'rate_limited') {
        return refuse('rate_limited', error);
      }
      throw error;
    }
    const device = await services.findDevice(body.device_id);
    if (!device) {
      return refuse('unmapped_device', new AppError('forbidden', INVALID_CREDENTIALS));
    }
    const reference = { reference: `Device/${device.id}` };
    annotateRequest(response, { caller: reference.reference });
    if (device.status !== 'active') {
      return refuse('inactive_device', new AppError('forbidden', 'The device is not active.'), reference);
    }

    const { access, expiresIn, tokenId } = await services.tokens.issue({ deviceId: body.device_id, deviceResourceId: device.id });
    // A token is only handed out once its issuance is on record.
    await services.audit(buildTokenIssuedEvent({ ...attempt, device: reference }, tokenId));
    telemetry.deviceTokenExchanges.add(1, { 'fhirgate.outcome': 'issued' });
    logger?.info('Device token issued', { deviceId: body.device_id, device: reference.reference, requestId: requestIdOf(response) });
    response.status(200).set('Cache-Control', 'no-store').json({ access, expires_in: expiresIn });
  });
  return router;
}

function readTokenRequest(body: unknown): z.output<typeof tokenRequestSchema> {
  const parsed = tokenRequestSchema.safeParse(body);
  if (!parsed.success) {
    const field = parsed.error.issues[0]?.path[0];
    const message =
      typeof body !== 'object' || body === null || Array.isArray(body)
        ? 'The request body must be a JSON object with device_id and api_key.'
        : `${String(field ?? 'body')} is required and must be a non-empty string.`;
    throw new AppError('invalid_request', message, { details: typeof field === 'string' ? { param: field } : undefined });
  }
  return parsed.data;
}
