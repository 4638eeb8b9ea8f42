/**
 * The server the end-to-end suite talks to, from the outside only (HTTP, MedplumClient, the openai SDK):
 * - given `E2E_BASE_URL`, a Medplum server with fhirgate mounted (or any standalone host), with a project
 *   administrator's client credentials in `E2E_CLIENT_ID` and `E2E_CLIENT_SECRET`; for the device checks also
 *   `E2E_DEVICE_AUTH_FILE` (the `device_auth` file the server reads) and `E2E_DEVICE_ID` (`npm run e2e` sets these
 *   from its flags);
 * - otherwise a standalone host of this checkout, started here on the LLM emulator, as a user would run it.
 * Either way the project is set up by `fhirgate provision` first, as docs/mounting.md tells operators to. Asked for
 * the ward's device (the device networks cases), it is provisioned into the same device_auth file and listed there
 * as allowed only from `E2E_WARD_ADDRESS`; the host started here then trusts only `E2E_PROXY_ADDRESS` as a proxy.
 * The local host reports each turn's repository operations (`FHIRGATE_REPORT_REPOSITORY_OPERATIONS=on`); a server
 * of the user's does when it was mounted with `reportRepositoryOperations` and `E2E_REPOSITORY_OPERATIONS=on` says so.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MedplumClient } from '@medplum/core';
import { DEFAULT_IDENTIFIER_SYSTEM, type DeviceAuthInput } from '../../plugin/devices/device-auth-config.ts';
import type { ProvisionReport } from '../../plugin/provision/provision-project.ts';
import { startLlmEmulator, type LlmEmulator } from '../emulator/index.ts';
import { startHostProcess, type HostProcess } from '../support/host-process.ts';

const run = promisify(execFile);

/** The device the suite uses when the device_auth file holds none for the project and `E2E_DEVICE_ID` names none. */
const OWN_DEVICE_ID = 'fhirgate-e2e-sensor';

/**
 * The device networks cases (device-networks.e2e.test.ts): the loopback address the suite's reverse proxy connects to
 * the target from, the one proxy the target trusts (the standalone host started here: `FHIRGATE_TRUST_PROXY`); and
 * the address the ward's device calls the proxy from, the only one in its allowlist.
 */
export const E2E_PROXY_ADDRESS = '127.0.0.2';
export const E2E_WARD_ADDRESS = '127.0.0.5';
/** The device of the networks cases, allowed only from `E2E_WARD_ADDRESS` (`allowed_networks_per_device`). */
const WARD_DEVICE_ID = 'fhirgate-e2e-ward-monitor';

/**
 * A device the suite may exchange a token for, in its identifier system, with its key and the requests it may
 * make a second (the file's `rate_limit_per_second`); `addedToFile` when this run's provision added it to the
 * device_auth file (or changed its networks there), which a running server has not read yet.
 */
export interface E2eDevice {
  readonly id: string;
  readonly identifierSystem: string;
  readonly resourceId: string;
  readonly key: string;
  readonly perSecond: number;
  readonly addedToFile: boolean;
}

/** What a test file asks of the target beyond the project and its device. */
export interface E2eTargetOptions {
  /** The ward's device too, limited to `E2E_WARD_ADDRESS`; and, on the host started here, only the suite's proxy trusted. */
  readonly wardDevice?: boolean;
}

/** A server ready for the suite. */
export interface E2eTarget {
  /** Base URL with a trailing slash. */
  readonly baseUrl: string;
  /** The project administrator, signed in. */
  readonly admin: MedplumClient;
  readonly projectId: string;
  readonly provisioned: ProvisionReport;
  /** The device the suite uses; undefined when the target has none configured. */
  readonly device?: E2eDevice;
  /** The ward's device, when asked for and the target has a device_auth file. */
  readonly wardDevice?: E2eDevice;
  /** True when the suite started the server itself (on the LLM emulator). */
  readonly local: boolean;
  close(): Promise<void>;
}

/** Whether the target's chat answers carry their repository operations (`X-Fhirgate-Repository-Operations`). */
export const reportsRepositoryOperations = !process.env.E2E_BASE_URL || process.env.E2E_REPOSITORY_OPERATIONS === 'on';

/** Connects to (or starts) the target and provisions its project. */
export async function connectE2eTarget(options: E2eTargetOptions = {}): Promise<E2eTarget> {
  return process.env.E2E_BASE_URL ? connectRemote(process.env.E2E_BASE_URL, options) : startLocal(options);
}

async function connectRemote(baseUrl: string, options: E2eTargetOptions): Promise<E2eTarget> {
  const clientId = requireVariable('E2E_CLIENT_ID');
  const clientSecret = requireVariable('E2E_CLIENT_SECRET');
  const authFile = process.env.E2E_DEVICE_AUTH_FILE;
  const url = baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`;
  const admin = await signInAdmin(url, clientId, clientSecret);
  const chosen = authFile ? { ...(await chooseDevice(authFile, admin.getProject()?.id, process.env.E2E_DEVICE_ID)), authFile } : undefined;
  const provisioned = await provision(url, { clientId, clientSecret }, chosen);
  const device = chosen ? await deviceOf(provisioned, chosen) : undefined;
  const wardDevice = chosen && options.wardDevice ? await provisionWardDevice(url, { clientId, clientSecret }, chosen) : undefined;
  return { baseUrl: url, admin, projectId: provisioned.projectId, provisioned, device, wardDevice, local: false, close: async () => undefined };
}

/**
 * The device the suite checks on a server of the user's: `E2E_DEVICE_ID` if given; otherwise the first device the
 * device_auth file already holds for the project (the one `fhirgate provision` registered, which the server read
 * when it was restarted), else a device of the suite's own. Always in the file's identifier system, or provision's
 * default for a new file, so that the suite and provision share one file.
 */
async function chooseDevice(authFile: string, projectId: string | undefined, requested: string | undefined): Promise<{ id: string; identifierSystem: string }> {
  const existing = await readFile(authFile, 'utf8').then(
    (text) => JSON.parse(text) as Partial<DeviceAuthInput>,
    () => undefined
  );
  // A file of another project is left to provision, which refuses it and says what to do.
  const ofProject = existing?.project_id === projectId ? existing : undefined;
  return {
    id: requested ?? Object.keys(ofProject?.valid_keys ?? {})[0] ?? OWN_DEVICE_ID,
    identifierSystem: existing?.identifier_system ?? DEFAULT_IDENTIFIER_SYSTEM,
  };
}

/**
 * The ward's device: provisioned into the same device_auth file as the suite's device, then allowed only from
 * `E2E_WARD_ADDRESS` there, as an operator lists a ward monitor's subnet (docs/devices.md).
 */
async function provisionWardDevice(
  baseUrl: string,
  credentials: { readonly clientId: string; readonly clientSecret: string },
  beside: { readonly identifierSystem: string; readonly authFile: string }
): Promise<E2eDevice | undefined> {
  const ward = { id: WARD_DEVICE_ID, identifierSystem: beside.identifierSystem, authFile: beside.authFile };
  const provisioned = await provision(baseUrl, credentials, ward);
  const listChanged = await allowOnly(beside.authFile, WARD_DEVICE_ID, [E2E_WARD_ADDRESS]);
  const device = await deviceOf(provisioned, ward);
  return device && { ...device, addedToFile: device.addedToFile || listChanged };
}

/** Sets the device's `allowed_networks_per_device` entry in the file, replacing the file whole; false when it was so already. */
async function allowOnly(authFile: string, deviceId: string, networks: readonly string[]): Promise<boolean> {
  const config = JSON.parse(await readFile(authFile, 'utf8')) as DeviceAuthInput;
  const perDevice = config.allowed_networks_per_device ?? {};
  if (JSON.stringify(perDevice[deviceId]) === JSON.stringify(networks)) {
    return false;
  }
  const partial = `${authFile}.partial`;
  await writeFile(partial, `${JSON.stringify({ ...config, allowed_networks_per_device: { ...perDevice, [deviceId]: [...networks] } }, null, 2)}\n`, { mode: 0o600 });
  await rename(partial, authFile);
  return true;
}

async function deviceOf(provisioned: ProvisionReport, chosen: { readonly id: string; readonly identifierSystem: string; readonly authFile: string }): Promise<E2eDevice | undefined> {
  if (!provisioned.device) {
    return undefined;
  }
  return {
    id: chosen.id,
    identifierSystem: chosen.identifierSystem,
    resourceId: provisioned.device.resourceId,
    addedToFile: provisioned.device.authFileChange !== 'unchanged',
    ...(await readDevice(chosen.authFile, chosen.id)),
  };
}

/**
 * A standalone host as `npm start` runs it, on the emulator: started, provisioned with a device (which writes the
 * device_auth file), then restarted on that file, as an operator would after provisioning a device.
 */
async function startLocal(options: E2eTargetOptions): Promise<E2eTarget> {
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-e2e-'));
  const emulator = await startLlmEmulator();
  const authFile = join(dataDir, 'device-auth.json');
  // The emulator answers on loopback: cleared for patient data.
  const environment = {
    FHIRGATE_DATA_DIR: dataDir,
    AI_PROVIDER: 'openai',
    AI_API_KEY: 'sk-e2e',
    AI_API_BASE: `${emulator.url}/v1`,
    AI_MODEL: 'gpt-4o-mini',
    AI_PATIENT_DATA_MODELS: '*',
    FHIRGATE_REPORT_REPOSITORY_OPERATIONS: 'on',
  };
  let host: HostProcess | undefined = await startHostProcess(environment);
  try {
    const credentials = await adminClientOf(dataDir, host.url);
    const chosen = { id: 'e2e-sensor-1', identifierSystem: DEFAULT_IDENTIFIER_SYSTEM, authFile };
    const provisioned = await provision(host.url, credentials, chosen);
    const wardDevice = options.wardDevice ? await provisionWardDevice(host.url, credentials, chosen) : undefined;
    await stop(host);
    // Behind the suite's proxy only: a forwarded address is believed from it and from no other caller.
    const trust: Record<string, string> = options.wardDevice ? { FHIRGATE_TRUST_PROXY: E2E_PROXY_ADDRESS } : {};
    host = await startHostProcess({ ...environment, ...trust, FHIRGATE_DEVICE_AUTH: authFile });
    const admin = await signInAdmin(host.url, credentials.clientId, credentials.clientSecret);
    const device = await deviceOf(provisioned, chosen);
    const running = host;
    return {
      baseUrl: host.url,
      admin,
      projectId: provisioned.projectId,
      provisioned,
      // Restarted on the file above: the host knows the device whatever provision just wrote.
      device: device && { ...device, addedToFile: false },
      wardDevice: wardDevice && { ...wardDevice, addedToFile: false },
      local: true,
      close: async () => {
        await stop(running);
        await closeQuietly(emulator);
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    if (host) {
      await stop(host);
    }
    await closeQuietly(emulator);
    throw error;
  }
}

/** The standalone host's project administrator client, as `npm run -s token -- --admin-client` prints it. */
async function adminClientOf(dataDir: string, baseUrl: string): Promise<{ clientId: string; clientSecret: string }> {
  const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts', '--admin-client'], {
    env: { ...process.env, FHIRGATE_DATA_DIR: dataDir, FHIRGATE_BASE_URL: baseUrl },
  });
  const printed = JSON.parse(stdout) as Record<string, string>;
  return { clientId: printed.clientId ?? printed.client_id, clientSecret: printed.clientSecret ?? printed.client_secret };
}

/** `fhirgate provision`, the command an operator runs, with the credentials in its environment; resolves its report. */
async function provision(
  baseUrl: string,
  credentials: { readonly clientId: string; readonly clientSecret: string },
  device?: { readonly id: string; readonly identifierSystem: string; readonly authFile: string }
): Promise<ProvisionReport> {
  const deviceFlags = device ? ['--device-id', device.id, '--identifier-system', device.identifierSystem, '--device-auth-file', device.authFile] : [];
  const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/main.ts', 'provision', '--base-url', baseUrl, ...deviceFlags], {
    env: { ...process.env, MEDPLUM_CLIENT_ID: credentials.clientId, MEDPLUM_CLIENT_SECRET: credentials.clientSecret },
  }).catch((error: { stderr?: string }) => Promise.reject(new Error(`fhirgate provision failed: ${error.stderr ?? String(error)}`)));
  return JSON.parse(stdout) as ProvisionReport;
}

async function signInAdmin(baseUrl: string, clientId: string, clientSecret: string): Promise<MedplumClient> {
  const admin = new MedplumClient({ baseUrl, fetch });
  await admin.startClientLogin(clientId, clientSecret);
  return admin;
}

async function readDevice(authFile: string, deviceId: string): Promise<{ key: string; perSecond: number }> {
  const { readDeviceKey } = await import('../../plugin/provision/device-auth-file.ts');
  const { rate_limit_per_second: perSecond } = JSON.parse(await readFile(authFile, 'utf8')) as { rate_limit_per_second?: number };
  // fhirgate's default when the file names none (docs/devices.md).
  return { key: await readDeviceKey(authFile, deviceId), perSecond: perSecond ?? 10 };
}

async function stop(host: HostProcess): Promise<void> {
  if (host.child.exitCode === null && host.child.signalCode === null) {
    const exited = once(host.child, 'exit');
    host.child.kill('SIGTERM');
    await exited;
  }
}

async function closeQuietly(emulator: LlmEmulator): Promise<void> {
  await emulator.close().catch(() => undefined);
}

function requireVariable(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is required with E2E_BASE_URL (npm run e2e -- --help)`);
  }
  return value;
}
