/**
 * The `device_auth` file `fhirgate provision` writes for a device it provisions (the file `FHIRGATE_DEVICE_AUTH`
 * names). The device's key and the token signing secret each live in a file of their own beside it (`secrets/`,
 * mode 0600), and the configuration names them as `file:` references, as fhirgate wants secrets kept.
 *
 * Whatever an earlier run left behind, the file is planned and checked before anything is written
 * (`planDeviceAuthFile`), so that provision refuses up front, in one line that says what to do, rather than
 * halfway: key files already in `secrets/` are kept and named again (a device may already hold its key), a file
 * the configuration names but that is gone is refused, and the result must be a `device_auth` the server accepts.
 * Nothing here prints a secret.
 */
import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { DEFAULT_IDENTIFIER_SYSTEM, deviceAuthSchema, resolveDeviceAuth, type DeviceAuthInput } from '../devices/device-auth-config.ts';

/** A device to provision. */
export interface ProvisionedDevice {
  readonly id: string;
  readonly identifierSystem: string;
}

/** What changed in the file. */
export type DeviceAuthFileChange = 'created' | 'device-added' | 'updated' | 'unchanged';

/** What `applyDeviceAuthFile` will do, checked: no secret in it. */
export interface DeviceAuthFilePlan {
  readonly path: string;
  readonly change: DeviceAuthFileChange;
  /** Key files to generate. */
  readonly keyFilesCreated: readonly string[];
  /** Key files found from an earlier run and named again, as they are. */
  readonly keyFilesKept: readonly string[];
  readonly config: DeviceAuthInput;
}

/** The `device_auth` file as `fhirgate provision` finds it: read, never written. */
function readExisting(path: string): Partial<DeviceAuthInput> | undefined {
  if (!existsSync(path)) {
    return undefined;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`${path} is not a device_auth file (${error instanceof Error ? error.message : 'unreadable'}): fix it, or give another --device-auth-file`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`${path} is not a device_auth file (not a JSON object): fix it, or give another --device-auth-file`);
  }
  return parsed as Partial<DeviceAuthInput>;
}

/** The `file:` references of a configuration, with the setting that names each. */
function fileReferences(config: DeviceAuthInput): { setting: string; path: string }[] {
  const list = (value: string | string[]): string[] => (Array.isArray(value) ? value : [value]);
  const settings: [string, string][] = [
    ...Object.entries(config.valid_keys).flatMap(([device, keys]) => list(keys).map((key): [string, string] => [`valid_keys.${device}`, key])),
    ...list(config.jwt_secret).map((secret): [string, string] => ['jwt_secret', secret]),
  ];
  return settings.filter(([, reference]) => reference.startsWith('file:')).map(([setting, reference]) => ({ setting, path: reference.slice('file:'.length) }));
}

/** The nearest folder of `path` that exists (what creating it needs write access to). */
function nearestExisting(path: string): string {
  let current = path;
  while (!existsSync(current) && dirname(current) !== current) {
    current = dirname(current);
  }
  return current;
}

function requireWritable(path: string, authFile: string): void {
  const target = nearestExisting(path);
  try {
    accessSync(target, constants.W_OK);
  } catch {
    throw new Error(`${target} is not writable: run provision as a user who may write there, or give another --device-auth-file than ${authFile}`);
  }
}

/**
 * Plans adding `device` (and the project) to the `device_auth` file at `path`, checking everything a write would
 * need; throws, with one line naming what to do, when the file cannot be made right. Writes nothing.
 */
export function planDeviceAuthFile(path: string, projectId: string, device: ProvisionedDevice): DeviceAuthFilePlan {
  const file = resolve(path);
  const secrets = join(dirname(file), 'secrets');
  const existing = readExisting(file);
  if (existing?.project_id !== undefined && existing.project_id !== projectId) {
    throw new Error(`${path} holds the devices of project ${existing.project_id}, not of this client's project ${projectId}: give another --device-auth-file`);
  }
  const fileSystem = existing?.identifier_system ?? (existing ? DEFAULT_IDENTIFIER_SYSTEM : undefined);
  if (fileSystem !== undefined && fileSystem !== device.identifierSystem) {
    throw new Error(`${path} names its devices in identifier system ${fileSystem}: run again with --identifier-system ${fileSystem}, or give another --device-auth-file`);
  }
  const keyFilesCreated: string[] = [];
  const keyFilesKept: string[] = [];
  // A key file left by an earlier run is named again rather than replaced: a device may already hold that key.
  const keyFile = (name: string): string => {
    const keyPath = join(secrets, name);
    (existsSync(keyPath) ? keyFilesKept : keyFilesCreated).push(keyPath);
    return `file:${keyPath}`;
  };
  const config: DeviceAuthInput = {
    ...existing,
    valid_keys: { ...existing?.valid_keys, [device.id]: existing?.valid_keys?.[device.id] ?? keyFile(`device-${device.id}.key`) },
    jwt_secret: existing?.jwt_secret ?? keyFile('device-token-signing.key'),
    identifier_system: device.identifierSystem,
    project_id: projectId,
  };
  checkSecretFiles(path, config, new Set(keyFilesCreated));
  const change = describeChange(existing, config, device.id);
  if (change !== 'unchanged') {
    requireWritable(dirname(file), path); // the file is replaced by a rename in its folder
    if (keyFilesCreated.length > 0) {
      requireWritable(secrets, path);
    }
  }
  return { path, change, keyFilesCreated, keyFilesKept, config };
}

function describeChange(existing: Partial<DeviceAuthInput> | undefined, config: DeviceAuthInput, deviceId: string): DeviceAuthFileChange {
  if (!existing) {
    return 'created';
  }
  if (!existing.valid_keys?.[deviceId]) {
    return 'device-added';
  }
  return JSON.stringify(existing) === JSON.stringify(config) ? 'unchanged' : 'updated';
}

/**
 * Every `file:` reference of `config` names a file that is there (or one to be generated, `toCreate`), and the
 * whole is a `device_auth` the server accepts (strong keys, a long enough signing secret).
 */
function checkSecretFiles(path: string, config: DeviceAuthInput, toCreate: ReadonlySet<string>): void {
  for (const reference of fileReferences(config)) {
    if (toCreate.has(reference.path)) {
      continue;
    }
    if (!existsSync(reference.path)) {
      throw new Error(`${path} names the key file ${reference.path} (${reference.setting}), which is missing: restore it, or remove ${reference.setting} from ${path} and run provision again to make a new one`);
    }
    const found = statSync(reference.path);
    if (!found.isFile()) {
      throw new Error(`${path} names ${reference.path} (${reference.setting}) as a key file, but it is not a file: move it away, or fix ${path}`);
    }
    if (readFileSync(reference.path, 'utf8').trim() === '') {
      throw new Error(`the key file ${reference.path} (${reference.setting} of ${path}) is empty: put its key back, or delete it (and ${reference.setting} from ${path}, if it is there) and run provision again to make a new one`);
    }
  }
  const parsed = deviceAuthSchema.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${path} would not be a valid device_auth (${issue.path.join('.')}: ${issue.message}): fix it, or give another --device-auth-file`);
  }
  // Files are checked as the server will read them; `env:` references belong to the server's environment, not this one.
  const placeholder = randomBytes(32).toString('base64url');
  const environment = new Proxy<Record<string, string>>({}, { get: () => placeholder });
  try {
    resolveDeviceAuth(parsed.data, { environment, readFile: (file) => (toCreate.has(file) ? placeholder : readFileSync(file, 'utf8')) });
  } catch (error) {
    throw new Error(`${path}: ${error instanceof Error ? error.message : String(error)}: fix it, or give another --device-auth-file`);
  }
}

/** Writes a new random secret to `path` (mode 0600); never over a file that is there. */
function writeSecret(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
}

/** Writes what `plan` checked: the new key files, then the file itself (replaced whole, never half-written). */
export function applyDeviceAuthFile(plan: DeviceAuthFilePlan): DeviceAuthFileChange {
  if (plan.change === 'unchanged') {
    return 'unchanged';
  }
  for (const keyPath of plan.keyFilesCreated) {
    writeSecret(keyPath);
  }
  const file = resolve(plan.path);
  mkdirSync(dirname(file), { recursive: true });
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, `${JSON.stringify(plan.config, null, 2)}\n`, { mode: 0o600 });
  renameSync(partial, file);
  return plan.change;
}

/** Adds `device` (and the project) to the `device_auth` file at `path`, creating it if needed. */
export function writeDeviceAuthFile(path: string, projectId: string, device: ProvisionedDevice): DeviceAuthFileChange {
  return applyDeviceAuthFile(planDeviceAuthFile(path, projectId, device));
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
