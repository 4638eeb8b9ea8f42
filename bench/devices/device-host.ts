/**
 * The standalone host as the devices benchmark runs it: its own process (`plugin/hosts/standalone/main.ts`, pinned
 * to its core), a fresh data folder, and a `device_auth` file that keeps the demo device but lifts its rate limit,
 * so the limit (10 per second by default) does not cap what is measured. Also fetches the credentials each side
 * uses: the demo device's key (for the token route and `/graphql`), the demo integration's client token (for
 * Medplum's own `/fhir/R4/$graphql`).
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { standaloneHostArgs, startNodeProcess, stopProcess, waitForOutput } from '../lib/processes.ts';

const run = promisify(execFile);

/** The demo fixture's project and device (fixtures/demo-project.json). */
export const DEMO_PROJECT_ID = 'a1f0c0de-0000-4000-8000-000000000001';
export const DEMO_DEVICE_RESOURCE_ID = 'a1f0c0de-0000-4000-8000-000000000701';
export const DEMO_DEVICE_ID = 'demo-monitor-1';
export const DEMO_IDENTIFIER_SYSTEM = 'urn:fhirgate:demo:device';

/** High enough that no benchmark request is ever refused by the limit; the limit itself is not what is measured. */
export const BENCH_RATE_LIMIT_PER_SECOND = 1_000_000;

// The token issuer; requests go to the real port.
const PUBLIC_URL = 'http://fhirgate-bench.example.test/';
const DEVICE_KEY = 'bench-device-key-0123456789abcdef';
const JWT_SECRET = 'bench-device-signing-secret-0123456789abcdefghijklmnop';

/** A running host and what the benchmark needs to call it. */
export interface DeviceHost {
  readonly url: string;
  readonly process: ChildProcess;
  readonly deviceKey: string;
  /** An access token of the demo integration (its AccessPolicy allows Observations). */
  readonly clientToken: string;
  readonly close: () => Promise<void>;
}

/** Starts the host on a free port with the benchmark's `device_auth`, pinned to `core` when given. */
export async function startDeviceHost(core: number | undefined, extraNodeArgs: readonly string[] = []): Promise<DeviceHost> {
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-bench-devices-'));
  const deviceAuthFile = join(dataDir, 'device-auth.json');
  await writeFile(
    deviceAuthFile,
    JSON.stringify({
      valid_keys: { [DEMO_DEVICE_ID]: 'env:BENCH_DEVICE_KEY' },
      jwt_secret: 'env:BENCH_DEVICE_JWT_SECRET',
      token_expiry_minutes: 60,
      identifier_system: DEMO_IDENTIFIER_SYSTEM,
      project_id: DEMO_PROJECT_ID,
      rate_limit_per_second: BENCH_RATE_LIMIT_PER_SECOND,
    }),
  );
  const env = {
    ...process.env,
    PORT: '0',
    FHIRGATE_BASE_URL: PUBLIC_URL,
    FHIRGATE_DATA_DIR: dataDir,
    FHIRGATE_DEVICE_AUTH: deviceAuthFile,
    BENCH_DEVICE_KEY: DEVICE_KEY,
    BENCH_DEVICE_JWT_SECRET: JWT_SECRET,
    // The start-up line (with the port) is an info line; info is also the host's default, logs included in the cost.
    LOG_LEVEL: 'info',
    AI_PROVIDER: '',
  };
  const child = startNodeProcess(standaloneHostArgs(extraNodeArgs), { core, env, stdio: ['ignore', 'ignore', 'pipe'] });
  const close = async (): Promise<void> => {
    await stopProcess(child, 20_000);
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const started = await waitForOutput(child, 'stderr', /"msg":"fhirgate standalone host started","url":"([^"]+)"/, 120_000);
    // Keep draining stderr (one log line per request at info) so the host never blocks on a full pipe.
    child.stderr?.resume();
    const url = started[1];
    const credentials = JSON.parse((await run(process.execPath, ['plugin/hosts/standalone/print-token.ts', '--client'], { env })).stdout) as {
      client_id: string;
      client_secret: string;
    };
    return { url, process: child, deviceKey: DEVICE_KEY, clientToken: await clientToken(url, credentials.client_id, credentials.client_secret), close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function clientToken(url: string, clientId: string, clientSecret: string): Promise<string> {
  const response = await fetch(`${url}oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
  });
  if (!response.ok) {
    throw new Error(`client token: HTTP ${response.status} ${await response.text()}`);
  }
  return ((await response.json()) as { access_token: string }).access_token;
}

/** Exchanges the demo device's key for a device token. */
export async function deviceToken(host: DeviceHost): Promise<string> {
  const response = await fetch(`${host.url}account/api/token/device/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ device_id: DEMO_DEVICE_ID, api_key: host.deviceKey }),
  });
  if (!response.ok) {
    throw new Error(`device token: HTTP ${response.status} ${await response.text()}`);
  }
  return ((await response.json()) as { access: string }).access;
}
