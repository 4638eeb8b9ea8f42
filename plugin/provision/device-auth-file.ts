/**
 * The `device_auth` file `fhirgate provision` writes for a device it provisions (the file `FHIRGATE_DEVICE_AUTH`
 * names). The device's key and the token signing secret are generated once, each into a file of its own beside
 * it (`secrets/`, mode 0600), and the configuration names them as `file:` references, as fhirgate wants secrets
 * kept; later runs keep them, so provisioning again changes nothing a device or the server already uses. Nothing
 * here prints a secret.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { DeviceAuthInput } from '../devices/device-auth-config.ts';

/** A device to provision. */
export interface ProvisionedDevice {
  readonly id: string;
  readonly identifierSystem: string;
}

/** What changed in the file. */
export type DeviceAuthFileChange = 'created' | 'device-added' | 'unchanged';

/** Writes a new random secret to `path` (mode 0600) and returns its `file:` reference. */
function writeSecret(path: string): string {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  return `file:${path}`;
}

/** Adds `device` (and the project) to the `device_auth` file at `path`, creating it if needed. */
export function writeDeviceAuthFile(path: string, projectId: string, device: ProvisionedDevice): DeviceAuthFileChange {
  const file = resolve(path);
  const secrets = join(dirname(file), 'secrets');
  const existing = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as DeviceAuthInput) : undefined;
  if (existing && (existing.project_id !== projectId || existing.identifier_system !== device.identifierSystem)) {
    throw new Error(`${path} is for another project or identifier system; give another --device-auth-file`);
  }
  if (existing?.valid_keys[device.id]) {
    return 'unchanged';
  }
  const config: DeviceAuthInput = {
    ...existing,
    valid_keys: { ...existing?.valid_keys, [device.id]: writeSecret(join(secrets, `device-${device.id}.key`)) },
    jwt_secret: existing?.jwt_secret ?? writeSecret(join(secrets, 'device-token-signing.key')),
    identifier_system: device.identifierSystem,
    project_id: projectId,
  };
  writeFileSync(file, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  return existing ? 'device-added' : 'created';
}

/** The key of `deviceId` in the `device_auth` file at `path` (for a device's own set-up, or a test). */
export function readDeviceKey(path: string, deviceId: string): string {
  const config = JSON.parse(readFileSync(path, 'utf8')) as DeviceAuthInput;
  const keys = config.valid_keys[deviceId];
  const reference = Array.isArray(keys) ? keys[0] : keys;
  if (!reference) {
    throw new Error(`${path} has no key for device ${deviceId}`);
  }
  return reference.startsWith('file:') ? readFileSync(reference.slice('file:'.length), 'utf8').trim() : reference;
}
