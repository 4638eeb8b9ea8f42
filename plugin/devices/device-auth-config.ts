/**
 * The spec's `device_auth` configuration, validated once at start-up. Secrets (`valid_keys` values, `jwt_secret`)
 * may be written as `env:NAME` or `file:/path` references, as the spec expects secrets to come from the
 * environment or a vault; a literal secret works but is reported as a warning. Validation messages name the
 * setting, never a secret's value.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { describeWeakKey } from './device-key-strength.ts';
import { createDeviceNetworks, createNetworkList, parseNetwork, type DeviceNetworks, type NetworkList, type ParsedNetwork } from './device-networks.ts';

/** A secret as written in the configuration: a literal, `env:NAME` or `file:/path`. */
const secretReference = z.string().min(1);

/** The `Device.identifier.system` of devices when `device_auth` names none (as `fhirgate provision` writes them). */
export const DEFAULT_IDENTIFIER_SYSTEM = 'urn:fhirgate:device';

/** Device ids: what devices send as `device_id`, and the `value` of their Device identifier. */
const deviceId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'device ids use letters, digits, ".", "_", ":" and "-" (at most 128)');

/** Schema of `device_auth` as a server writes it. */
export const deviceAuthSchema = z
  .object({
    /** Device id → its pre-registered API key, or several keys at once while one is being rotated. */
    valid_keys: z.record(deviceId, z.union([secretReference, z.array(secretReference).min(1)])),
    /** HS256 signing secret (at least 32 bytes); a list signs with the first and still accepts the others (rotation). */
    jwt_secret: z.union([secretReference, z.array(secretReference).min(1)]),
    /** Token validity in minutes, 5 to 1440. The spec's sources disagree on a default; 5, the shortest, is used. */
    token_expiry_minutes: z.number().int().min(5).max(1440).default(5),
    /** The `Device.identifier.system` that names devices by their device id. */
    identifier_system: z.string().min(1).default(DEFAULT_IDENTIFIER_SYSTEM),
    /**
     * The Medplum project the devices belong to. Required in a Medplum server (it holds many projects); the
     * standalone host fills in its demo project, or its one project, when the file names none.
     */
    project_id: z.string().min(1).optional(),
    /** Requests per second per device, across the token route and `/graphql`; only the device's own (a key that matched, a valid token) count. */
    rate_limit_per_second: z.number().int().positive().default(10),
    /** Failed exchanges (wrong key, unknown device) from one source address per window before it is locked out. */
    failed_attempts_per_source: z.number().int().positive().default(10),
    /** Failed exchanges naming one device id, from any source, per window before that id is locked out for failing keys. */
    failed_attempts_per_device: z.number().int().positive().default(20),
    /** The window of the failed-attempt limits, and the period over which refusals past the first few are summarised. */
    failed_attempts_window_seconds: z.number().int().min(1).max(3600).default(60),
    /** How long a source or device id past its limit has its failing attempts answered 429. The right key always passes. */
    lockout_seconds: z.number().int().min(1).max(86_400).default(300),
    /** Networks (addresses, CIDR ranges; IPv4 and IPv6) every device may come from; unset: anywhere. */
    allowed_networks: z.array(z.string()).min(1).optional(),
    /** Device id → the networks that device may come from, instead of `allowed_networks`. */
    allowed_networks_per_device: z.record(deviceId, z.array(z.string()).min(1)).optional(),
    /** Create an active Device on the first valid exchange of a device that has none. */
    auto_register: z.boolean().default(false),
    /** `deviceName` (type `manufacturer`) of auto-registered Devices. */
    manufacturer: z.string().min(1).optional(),
  })
  .strict();

/** `device_auth` as written. */
export type DeviceAuthInput = z.input<typeof deviceAuthSchema>;

/** `device_auth` after validation, secrets still as written. */
export type DeviceAuthOptions = z.output<typeof deviceAuthSchema>;

/** `device_auth` ready to use: every secret resolved. */
export interface DeviceAuthConfig {
  readonly validKeys: ReadonlyMap<string, readonly string[]>;
  /** The first signs new tokens; all verify. */
  readonly jwtSecrets: readonly string[];
  readonly tokenExpiryMinutes: number;
  readonly identifierSystem: string;
  readonly projectId: string;
  readonly rateLimitPerSecond: number;
  readonly failedAttempts: { readonly perSource: number; readonly perDevice: number; readonly windowSeconds: number; readonly lockoutSeconds: number };
  readonly autoRegister: boolean;
  readonly manufacturer?: string;
  /** Where each device may come from (the token exchange and every `/graphql` request check it). */
  readonly networks: DeviceNetworks;
}

/** Where secrets are looked up; replaceable in tests. */
export interface SecretSources {
  readonly environment: Readonly<Record<string, string | undefined>>;
  readonly readFile: (path: string) => string;
}

const MIN_JWT_SECRET_BYTES = 32;

/**
 * Resolves every secret reference. Throws an Error listing each problem by setting (a missing variable or file,
 * a weak device key, a short signing secret), on one line; returns the settings that hold literal secrets as warnings.
 */
export function resolveDeviceAuth(
  options: DeviceAuthOptions,
  sources: SecretSources = { environment: process.env, readFile: (path) => readFileSync(path, 'utf8') },
): { config: DeviceAuthConfig; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  const resolve = (reference: string, setting: string): string => {
    if (reference.startsWith('env:')) {
      const value = sources.environment[reference.slice(4)]?.trim();
      if (!value) {
        problems.push(`${setting}: the environment variable ${reference.slice(4)} is not set`);
      }
      return value ?? '';
    }
    if (reference.startsWith('file:')) {
      try {
        const value = sources.readFile(reference.slice(5)).trim();
        if (!value) {
          problems.push(`${setting}: the file ${reference.slice(5)} is empty`);
        }
        return value;
      } catch {
        problems.push(`${setting}: the file ${reference.slice(5)} cannot be read`);
        return '';
      }
    }
    warnings.push(`${setting} holds a literal secret; use env:NAME or file:/path so it stays out of configuration files`);
    return reference;
  };
  const list = (value: string | string[]): string[] => (Array.isArray(value) ? value : [value]);

  const validKeys = new Map<string, string[]>();
  for (const [device, keys] of Object.entries(options.valid_keys)) {
    validKeys.set(
      device,
      list(keys).map((key, index) => {
        const setting = `device_auth.valid_keys.${device}${Array.isArray(keys) ? `[${index}]` : ''}`;
        const value = resolve(key, setting);
        const weakness = value ? describeWeakKey(value) : undefined;
        if (weakness) {
          problems.push(`${setting}: the key of device ${device} is ${weakness}`);
        }
        return value;
      }),
    );
  }
  const jwtSecrets = list(options.jwt_secret).map((secret, index) => {
    const setting = `device_auth.jwt_secret${Array.isArray(options.jwt_secret) ? `[${index}]` : ''}`;
    const value = resolve(secret, setting);
    if (value && Buffer.byteLength(value, 'utf8') < MIN_JWT_SECRET_BYTES) {
      problems.push(`${setting}: must be at least ${MIN_JWT_SECRET_BYTES} bytes`);
    }
    return value;
  });
  const readNetworks = (entries: readonly string[], setting: string, owner: string): NetworkList => {
    const parsed: ParsedNetwork[] = [];
    entries.forEach((entry, index) => {
      const network = parseNetwork(entry);
      if (network) {
        parsed.push(network);
      } else {
        problems.push(`${setting}[${index}]: ${JSON.stringify(entry)} of ${owner} is not an IPv4 or IPv6 address or CIDR range`);
      }
    });
    return createNetworkList(entries, parsed);
  };
  const forAllDevices = options.allowed_networks && readNetworks(options.allowed_networks, 'device_auth.allowed_networks', 'all devices');
  const perDevice = new Map<string, NetworkList>();
  for (const [device, entries] of Object.entries(options.allowed_networks_per_device ?? {})) {
    const setting = `device_auth.allowed_networks_per_device.${device}`;
    if (!validKeys.has(device)) {
      // A misspelt id would otherwise leave the device it meant free to come from anywhere.
      problems.push(`${setting}: device ${device} has no key in device_auth.valid_keys`);
    }
    perDevice.set(device, readNetworks(entries, setting, `device ${device}`));
  }
  if (!options.project_id) {
    problems.push('device_auth.project_id: required: the project the devices belong to (a Medplum server holds several)');
  }
  if (problems.length > 0 || !options.project_id) {
    throw new Error(`Invalid device_auth configuration: ${problems.join('; ')}`);
  }
  return {
    config: {
      validKeys,
      jwtSecrets,
      tokenExpiryMinutes: options.token_expiry_minutes,
      identifierSystem: options.identifier_system,
      projectId: options.project_id,
      rateLimitPerSecond: options.rate_limit_per_second,
      failedAttempts: {
        perSource: options.failed_attempts_per_source,
        perDevice: options.failed_attempts_per_device,
        windowSeconds: options.failed_attempts_window_seconds,
        lockoutSeconds: options.lockout_seconds,
      },
      autoRegister: options.auto_register,
      manufacturer: options.manufacturer,
      networks: createDeviceNetworks(forAllDevices, perDevice),
    },
    warnings,
  };
}
