/**
 * Everything the device routes share, built once from `device_auth` and the host: the resolved configuration,
 * the key check, the token service, the device's request budget and the failed-attempt limits (on the host's
 * Redis, each call with a deadline, or in memory), the device mapping (the device-mapping bot's logic, run
 * in-process on the project's system repository), the device's own repository, AuditEvent writes and the bounded
 * record of refusals.
 */
import type { WithId } from '@medplum/core';
import { parseSearchRequest } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AccessPolicy, AccessPolicyResource, AuditEvent, Device, Patient } from '@medplum/fhirtypes';
import { mapDevice, type DeviceLookupClient } from '../../bots/device-mapping.ts';
import type { FhirgateHost } from '../host.ts';
import { resolveDeviceAuth, type DeviceAuthConfig, type DeviceAuthOptions } from './device-auth-config.ts';
import { createDeviceKeyCheck, type DeviceKeyCheck } from './device-keys.ts';
import { createDeviceRateLimiter, type DeviceRateLimiter } from './device-rate-limiter.ts';
import { createFailedAttemptLimiter, type FailedAttemptLimiter } from './failed-attempt-limiter.ts';
import { createLimiterStore } from './limiter-store.ts';
import { RefusalAudit } from './refusal-audit.ts';
import type { DeviceAuthAttempt, DeviceAuthFailure } from './device-audit.ts';
import { createDeviceTokenService, type DeviceTokenService } from './device-tokens.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';

/** The device routes' shared parts. */
export interface DeviceServices {
  readonly config: DeviceAuthConfig;
  readonly checkKey: DeviceKeyCheck;
  readonly tokens: DeviceTokenService;
  /** The device's own request budget: spent only by requests that proved to be the device's. */
  readonly rateLimiter: DeviceRateLimiter;
  /** Failed exchanges by source address and by device id, with their lockout. */
  readonly failedAttempts: FailedAttemptLimiter;
  /** Refused exchanges on record: the first ones of each source one by one, the rest summarised per period. */
  readonly refusals: RefusalAudit;
  /**
   * Puts one refusal on record: counted in `fhirgate.device.token_exchanges` with its reason, and in the refusal
   * AuditEvents (one by one or summarised). A record that cannot be written is logged, never thrown: the caller
   * is refused either way.
   */
  recordRefusal(attempt: DeviceAuthAttempt, reason: DeviceAuthFailure): Promise<void>;
  /** The Device of a device id (registering it when `auto_register` is on), or undefined. */
  findDevice(deviceId: string): Promise<WithId<Device> | undefined>;
  /** The Device resource by id, or undefined when it is gone. */
  readDevice(deviceResourceId: string): Promise<WithId<Device> | undefined>;
  /**
   * The patient a Device is assigned to: its `Device.patient`, when that is a literal `Patient/<id>` reference to
   * a Patient of the devices' project; otherwise (none, a Patient of another project, a deleted or missing one)
   * undefined, and the device writes about no patient.
   */
  findAssignedPatient(device: Device): Promise<WithId<Patient> | undefined>;
  /** The repository a device acts with: its own AccessPolicy (about its assigned patient, if any), authored as the device. */
  deviceRepo(deviceResourceId: string, assignedPatientId?: string): Promise<FhirRepository>;
  /** Writes an AuditEvent in the devices' project, with system rights. */
  audit(event: AuditEvent): Promise<void>;
  /** Writes the refusal summaries still open and stops probing Redis. For shutdown. */
  close(): Promise<void>;
}

/** Builds the services; throws at start-up when `device_auth` is wrong, and logs literal secrets as warnings. */
export function createDeviceServices(host: FhirgateHost, options: DeviceAuthOptions, telemetry: Telemetry, redisKeyPrefix?: string): DeviceServices {
  const { config, warnings } = resolveDeviceAuth(options);
  for (const warning of warnings) {
    host.logger?.warn(warning);
  }
  const systemRepo = (): Promise<FhirRepository> => host.getSystemRepo(config.projectId);
  const audit = async (event: AuditEvent): Promise<void> => {
    await (await systemRepo()).createResource(event);
  };
  const limits = createLimiterStore(host.redis, { logger: host.logger });
  const guard = limits.guard;
  if (guard) {
    telemetry.redisAvailable.addCallback((result) => result.observe(guard.available ? 1 : 0));
  }
  const refusals = new RefusalAudit({
    periodSeconds: config.failedAttempts.windowSeconds,
    identifierSystem: config.identifierSystem,
    write: audit,
    logger: host.logger,
  });
  return {
    config,
    checkKey: createDeviceKeyCheck(config.validKeys),
    tokens: createDeviceTokenService(config.jwtSecrets, config.tokenExpiryMinutes),
    rateLimiter: createDeviceRateLimiter(
      config.rateLimitPerSecond,
      limits,
      () => telemetry.rateLimitRejections.add(1, { 'fhirgate.limit': 'device' }),
      redisKeyPrefix
    ),
    failedAttempts: createFailedAttemptLimiter(
      config.failedAttempts,
      limits,
      (limit) => telemetry.rateLimitRejections.add(1, { 'fhirgate.limit': limit }),
      redisKeyPrefix
    ),
    refusals,
    recordRefusal: async (attempt, reason) => {
      telemetry.deviceTokenExchanges.add(1, { 'fhirgate.outcome': 'refused', 'fhirgate.reason': reason });
      await refusals.record(attempt, reason).catch((auditError: unknown) => {
        host.logger?.error('Could not record a refused device token exchange', { reason, error: String(auditError) });
      });
    },
    findDevice: async (deviceId) => {
      const { device } = await mapDevice(repositoryLookupClient(await systemRepo()), {
        deviceId,
        identifierSystem: config.identifierSystem,
        autoRegister: config.autoRegister,
        manufacturer: config.manufacturer,
      });
      return device?.id ? (device as WithId<Device>) : undefined;
    },
    readDevice: async (deviceResourceId) => {
      try {
        return await (await systemRepo()).readResource<Device>('Device', deviceResourceId);
      } catch (error) {
        if (isOutcomeStatus(error, 404, 410)) {
          return undefined;
        }
        throw error;
      }
    },
    findAssignedPatient: async (device) => {
      const patientId = assignedPatientIdOf(device);
      if (!patientId) {
        return undefined;
      }
      try {
        const patient = await (await systemRepo()).readResource<Patient>('Patient', patientId);
        // A Medplum project may read Patients of the projects it links to: the device writes only into its own.
        return patient.meta?.project === config.projectId ? patient : undefined;
      } catch (error) {
        if (isOutcomeStatus(error, 403, 404, 410)) {
          return undefined;
        }
        throw error;
      }
    },
    deviceRepo: async (deviceResourceId, assignedPatientId) =>
      host.getDeviceRepo(config.projectId, buildDevicePolicy(deviceResourceId, assignedPatientId), { reference: `Device/${deviceResourceId}` }),
    audit,
    close: async () => {
      limits.close();
      await refusals.close();
    },
  };
}

/**
 * A device's AccessPolicy: it may create, read and search Observations that name it as their device and are about
 * no one, about itself, or about its assigned patient, with no `performer` (the other way Medplum files an
 * Observation into a patient's compartment); and read its own Device. Nothing else. Built on every request from
 * the Device as it is then, so a reassignment applies to the next request, reads included: a device moved to
 * another patient no longer reads what it wrote about the previous one.
 */
export function buildDevicePolicy(deviceResourceId: string, assignedPatientId?: string): AccessPolicy {
  const own = `Observation?device=Device/${deviceResourceId}&performer:missing=true`;
  const subjects = [`Device/${deviceResourceId}`, ...(assignedPatientId ? [`Patient/${assignedPatientId}`] : [])];
  const interaction: AccessPolicyResource['interaction'] = ['create', 'read', 'search'];
  return {
    resourceType: 'AccessPolicy',
    name: `fhirgate device ${deviceResourceId}`,
    resource: [
      { resourceType: 'Observation', criteria: `${own}&subject:missing=true`, interaction },
      { resourceType: 'Observation', criteria: `${own}&subject=${subjects.join(',')}`, interaction },
      { resourceType: 'Device', criteria: `Device?_id=${deviceResourceId}`, readonly: true },
    ],
  };
}

/** The id in `Device.patient` when it is a literal reference to a Patient (not a URL, a version, a search). */
function assignedPatientIdOf(device: Device): string | undefined {
  const match = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(device.patient?.reference ?? '');
  return match?.[1];
}

/** The device-mapping bot's two FHIR calls over a repository, so the bot's logic runs in-process. */
function repositoryLookupClient(repo: FhirRepository): DeviceLookupClient {
  return {
    searchResources: (resourceType, query) => repo.searchResources<Device>(parseSearchRequest(resourceType, query)),
    createResourceIfNoneExist: async (resource, query) =>
      (await repo.conditionalCreate<Device>(resource, parseSearchRequest(`Device?${query}`))).resource,
  };
}
