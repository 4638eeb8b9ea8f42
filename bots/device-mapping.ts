/**
 * Device-mapping bot: maps a device id (the `device_id` of the device token exchange) to its FHIR `Device`, the
 * one whose `identifier` holds exactly `{system: identifierSystem, value: deviceId}`, and optionally registers it.
 *
 * Deployed as a Medplum bot (`handler`), and run in-process by fhirgate's device token route (`mapDevice`).
 * Self-contained: it imports only types from @medplum/core and @medplum/fhirtypes, so it compiles to one file.
 * It never sees a secret: the API key check happens before, in the caller.
 */
import type { BotEvent, MedplumClient } from '@medplum/core';
import type { Device, DeviceDeviceName } from '@medplum/fhirtypes';

/** What the bot is asked: which device, under which identifier system, and whether to register it if unknown. */
export interface DeviceMappingInput {
  deviceId: string;
  identifierSystem: string;
  autoRegister?: boolean;
  manufacturer?: string;
  deviceName?: string;
}

/** The Device found or registered (undefined when neither), whether it was registered, whether several matched. */
export interface DeviceMappingResult {
  device?: Device;
  created: boolean;
  ambiguous?: boolean;
}

/** The two FHIR calls the mapping needs; a `MedplumClient` satisfies it, and so can an adapter over a repository. */
export interface DeviceLookupClient {
  searchResources(resourceType: 'Device', query: Record<string, string>): Promise<Device[]>;
  createResourceIfNoneExist(resource: Device, query: string): Promise<Device>;
}

const INPUT_FIELDS = new Set(['deviceId', 'identifierSystem', 'autoRegister', 'manufacturer', 'deviceName']);

/** Medplum bot entry point. */
export async function handler(
  medplum: MedplumClient,
  event: BotEvent<DeviceMappingInput>
): Promise<DeviceMappingResult> {
  return mapDevice(medplum, event.input);
}

/** Finds the Device carrying the identifier `identifierSystem|deviceId`, registering it when asked and none exists. */
export async function mapDevice(
  client: DeviceLookupClient,
  input: DeviceMappingInput
): Promise<DeviceMappingResult> {
  const { deviceId, identifierSystem, autoRegister, manufacturer, deviceName } = parseDeviceMappingInput(input);
  const token = escapeSearchValue(`${identifierSystem}|${deviceId}`);

  const found = await client.searchResources('Device', { identifier: token, _sort: '_lastUpdated' });
  // Token search may be looser than equality (the in-memory matcher ignores case), so equality is checked here.
  const matches = found.filter((device) => hasIdentifier(device, identifierSystem, deviceId)).sort(compareCandidates);
  if (matches.length > 1) {
    return { device: matches[0], created: false, ambiguous: true };
  }
  if (matches.length === 1) {
    return { device: matches[0], created: false };
  }
  if (!autoRegister) {
    return { device: undefined, created: false };
  }

  // Conditional create, so that two first-time registrations racing each other leave one Device.
  const device = await client.createResourceIfNoneExist(
    buildDevice(identifierSystem, deviceId, manufacturer, deviceName),
    `identifier=${encodeURIComponent(token)}`
  );
  if (!hasIdentifier(device, identifierSystem, deviceId)) {
    throw new Error(
      `Registering device "${deviceId}" returned Device/${device.id}, which does not carry the identifier ` +
        `${identifierSystem}|${deviceId} exactly (the server's identifier search is looser than equality); ` +
        'resolve the conflict by hand'
    );
  }
  // When a concurrent registration won the race, this Device is theirs; `created` still reports that this lookup
  // found none and a Device now exists (the client does not expose 200 versus 201).
  return { device, created: true };
}

/** True when the Device may act (`status` is `active`); an inactive Device is still returned by the mapping. */
export function isDeviceActive(device: Device | undefined): boolean {
  return device?.status === 'active';
}

/** Checks the bot input, throwing an Error that names the problem; the input must carry no other field. */
export function parseDeviceMappingInput(input: unknown): DeviceMappingInput {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new Error('Device mapping input must be a JSON object with deviceId and identifierSystem');
  }
  const fields = input as Record<string, unknown>;
  // Rejecting unknown fields keeps secrets (an api_key passed along with the request body) out of the bot.
  const unknown = Object.keys(fields).filter((key) => !INPUT_FIELDS.has(key));
  if (unknown.length > 0) {
    throw new Error(`Device mapping input has unknown field(s): ${unknown.join(', ')}; it takes no secrets`);
  }
  const parsed: DeviceMappingInput = {
    deviceId: requireIdentifierPart(fields.deviceId, 'deviceId'),
    identifierSystem: requireIdentifierPart(fields.identifierSystem, 'identifierSystem'),
  };
  if (fields.autoRegister !== undefined) {
    if (typeof fields.autoRegister !== 'boolean') {
      throw new Error('Device mapping input autoRegister must be a boolean');
    }
    parsed.autoRegister = fields.autoRegister;
  }
  for (const key of ['manufacturer', 'deviceName'] as const) {
    const value = fields[key];
    if (value !== undefined && typeof value !== 'string') {
      throw new Error(`Device mapping input ${key} must be a string`);
    }
    if (value?.trim()) {
      parsed[key] = value.trim();
    }
  }
  return parsed;
}

function requireIdentifierPart(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new Error(`Device mapping input ${name} is required and must be a non-blank string`);
  }
  // Medplum trims indexed token values, and `|` separates system from value in a token search.
  if (value !== value.trim()) {
    throw new Error(`Device mapping input ${name} must not start or end with whitespace`);
  }
  if (value.includes('|')) {
    throw new Error(`Device mapping input ${name} must not contain "|"`);
  }
  return value;
}

function hasIdentifier(device: Device, system: string, value: string): boolean {
  return (device.identifier ?? []).some((identifier) => identifier.system === system && identifier.value === value);
}

/** Active Devices first, then the oldest (meta.lastUpdated), then by id, so every caller picks the same one. */
function compareCandidates(a: Device, b: Device): number {
  const activeOrder = Number(isDeviceActive(b)) - Number(isDeviceActive(a));
  if (activeOrder !== 0) {
    return activeOrder;
  }
  const updatedOrder = (a.meta?.lastUpdated ?? '').localeCompare(b.meta?.lastUpdated ?? '');
  return updatedOrder !== 0 ? updatedOrder : (a.id ?? '').localeCompare(b.id ?? '');
}

function buildDevice(system: string, value: string, manufacturer?: string, deviceName?: string): Device {
  // R4 binds deviceName.type to DeviceNameType (required), whose code for a manufacturer is `manufacturer-name`.
  const names: DeviceDeviceName[] = [];
  if (manufacturer) {
    names.push({ name: manufacturer, type: 'manufacturer-name' });
  }
  if (deviceName) {
    names.push({ name: deviceName, type: 'user-friendly-name' });
  }
  return {
    resourceType: 'Device',
    status: 'active',
    identifier: [{ system, value }],
    ...(manufacturer ? { manufacturer } : {}),
    ...(names.length > 0 ? { deviceName: names } : {}),
  };
}

/** FHIR search escaping (a comma would otherwise split the value into alternatives); inline to stay self-contained. */
function escapeSearchValue(value: string): string {
  return value.replaceAll(/[\\,]/g, '\\$&');
}
