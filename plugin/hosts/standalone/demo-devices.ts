/**
 * Device authentication for the standalone host. `FHIRGATE_DEVICE_AUTH` names a JSON file holding the spec's
 * `device_auth` object (secrets as `env:NAME` or `file:/path`). Without it, when the demo project is loaded, the
 * demo device `demo-monitor-1` (a Device of the demo fixture) gets a key and the host a signing secret, both
 * generated once into `<data dir>/secrets/` (mode 0600) and referenced as `file:`, never printed in logs.
 */
import { readFileSync } from 'node:fs';
import type { DeviceAuthInput } from '../../devices/device-auth-config.ts';
import { ensureSecretFile } from './secret-files.ts';

/** The demo device's id (its Device identifier value) and identifier system. */
export const DEMO_DEVICE = { id: 'demo-monitor-1', identifierSystem: 'urn:fhirgate:demo:device' } as const;

/** The `device_auth` of the standalone host, or undefined when devices are not configured. */
export function readStandaloneDeviceAuth(options: {
  readonly configFile?: string;
  readonly dataDir: string;
  /** The demo project's id, when the demo is loaded. */
  readonly demoProjectId?: string;
  /** The project a file that names none means: the demo project, or the host's only one. */
  readonly defaultProjectId?: string;
}): DeviceAuthInput | undefined {
  if (options.configFile) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(options.configFile, 'utf8'));
    } catch (error) {
      throw new Error(`Invalid configuration: FHIRGATE_DEVICE_AUTH: cannot read ${options.configFile} as JSON (${(error as Error).message})`, { cause: error });
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new Error(`Invalid configuration: FHIRGATE_DEVICE_AUTH: ${options.configFile} must hold the device_auth object`);
    }
    // The spec's three settings are enough here: the devices are the host's one project's (or the demo's).
    const input = parsed as DeviceAuthInput;
    return input.project_id === undefined && options.defaultProjectId ? { ...input, project_id: options.defaultProjectId } : input;
  }
  if (!options.demoProjectId) {
    return undefined;
  }
  const { keyFile, secretFile } = ensureDemoSecrets(options.dataDir);
  return {
    valid_keys: { [DEMO_DEVICE.id]: `file:${keyFile}` },
    jwt_secret: `file:${secretFile}`,
    token_expiry_minutes: 60,
    identifier_system: DEMO_DEVICE.identifierSystem,
    project_id: options.demoProjectId,
  };
}

/** The demo device's key (generated on first use), for `npm run -s token -- --device`. */
export function readDemoDeviceKey(dataDir: string): string {
  return readFileSync(ensureDemoSecrets(dataDir).keyFile, 'utf8').trim();
}

function ensureDemoSecrets(dataDir: string): { keyFile: string; secretFile: string } {
  return { keyFile: ensureSecretFile(dataDir, `${DEMO_DEVICE.id}.key`, 24), secretFile: ensureSecretFile(dataDir, 'device-jwt-secret', 48) };
}
