/**
 * The standalone host as its own process (`plugin/hosts/standalone/main.ts`), for tests that signal or kill it:
 * started on a free port with the given environment, its JSON log lines collected.
 */
import { createHash } from 'node:crypto';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { waitFor } from './wait-for.ts';

const run = promisify(execFile);

/** A running host process. */
export interface HostProcess {
  readonly child: ChildProcess;
  /** Base URL with a trailing slash. */
  readonly url: string;
  /** Everything the process logged so far. */
  logs(): string;
}

/** Waits until `condition` holds. */
export function until(condition: () => boolean, timeoutMs = 10_000): Promise<true> {
  return waitFor(async () => (condition() ? true : undefined), timeoutMs);
}

/**
 * Starts the host with `env` over the test's environment (PORT 0, info logs) and waits for its start-up line. Hosts
 * on one data directory share their keys in Redis (when the environment has one), and no others do. `launcher`: a
 * command the host runs under (`unshare ...`), given the host's command line as its arguments.
 */
export async function startHostProcess(env: Readonly<Record<string, string>>, launcher: readonly string[] = []): Promise<HostProcess> {
  const keyPrefix = `fhirgate:test:${createHash('sha256').update(env.FHIRGATE_DATA_DIR ?? 'default').digest('hex').slice(0, 16)}:`;
  const [command, ...args] = [...launcher, process.execPath, 'plugin/hosts/standalone/main.ts'];
  const child = spawn(command, args, {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', FHIRGATE_REDIS_KEY_PREFIX: keyPrefix, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let logs = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    logs += chunk.toString();
  });
  await until(() => /"msg":"fhirgate standalone host started"/.test(logs) || child.exitCode !== null, 60_000);
  const url = /"url":"([^"]+)"/.exec(logs)?.[1];
  if (!url) {
    throw new Error(`the host did not start: ${logs.slice(-2000)}`);
  }
  return { child, url, logs: () => logs };
}

/** An access token of the demo practitioner, as `npm run token` prints it, for the host on `dataDir`. */
export async function demoToken(dataDir: string, issuer: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts'], { env: { ...process.env, FHIRGATE_DATA_DIR: dataDir, FHIRGATE_BASE_URL: issuer } });
  return stdout.trim();
}
