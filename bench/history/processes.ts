/**
 * The benchmark's processes: the LLM emulator, the standalone host and the load, each its own process, pinned to
 * a core with `taskset` where it exists (host on core 1; emulator and load on core 0).
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const HAS_TASKSET = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
/** The host signs tokens for this issuer; the token command must use the same one. */
const BASE_URL = 'http://fhirgate.bench.test/';

/** A child process and how to stop it. */
export interface RunningProcess {
  readonly child: ChildProcess;
  readonly url: string;
}

/** True when processes are pinned to cores. */
export const isPinned = HAS_TASKSET;

/** Spawns `node <args>` pinned to `core` (when taskset exists). */
export function spawnNode(core: number, args: readonly string[], options: { env?: NodeJS.ProcessEnv; stdout?: 'pipe' | 'ignore' }): ChildProcess {
  const command = HAS_TASKSET ? 'taskset' : process.execPath;
  const commandArgs = HAS_TASKSET ? ['-c', String(core), process.execPath, ...args] : [...args];
  return spawn(command, commandArgs, { env: options.env ?? process.env, stdio: ['ignore', options.stdout ?? 'ignore', 'pipe'] });
}

/** Starts the emulator with no latency on core 0; resolves once it prints its URL. */
export async function startEmulator(): Promise<RunningProcess> {
  const child = spawnNode(0, ['test/emulator/main.ts', '--port', '0', '--behaviour', '{"latencyMs":0}'], { stdout: 'pipe' });
  const url = await waitForOutput(child, 'stdout', /\{"url":\s*"([^"]+)"\}/, 'emulator');
  return { child, url };
}

/** What the host runs with. */
export interface HostOptions {
  readonly dataDir: string;
  readonly emulatorUrl: string;
  /** Write a V8 CPU profile of the host into this folder when it exits. */
  readonly cpuProfileDir?: string;
}

/** Starts the standalone host on core 1; resolves with its URL once it is listening. */
export async function startHost(options: HostOptions): Promise<RunningProcess> {
  const profile = options.cpuProfileDir ? ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir] : [];
  const child = spawnNode(1, [...profile, 'plugin/hosts/standalone/main.ts'], { env: hostEnvironment(options), stdout: 'pipe' });
  // At LOG_LEVEL=warn the "started" log line is not written; the banner on stdout says the same.
  const url = await waitForOutput(child, 'stdout', /fhirgate is listening on (\S+)/, 'host');
  return { child, url };
}

/** An access token for the demo practitioner, signed with the keys in the data folder. */
export async function demoToken(dataDir: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts'], {
    env: { ...process.env, FHIRGATE_BASE_URL: BASE_URL, FHIRGATE_DATA_DIR: dataDir },
  });
  return stdout.trim();
}

/** Sends SIGTERM and waits for the exit (the host drains, then writes its CPU profile if asked). */
export async function stopProcess(running: { child: ChildProcess }): Promise<void> {
  if (running.child.exitCode !== null || running.child.signalCode !== null) {
    return;
  }
  const exited = new Promise((resolve) => running.child.once('exit', resolve));
  running.child.kill('SIGTERM');
  await exited;
}

function hostEnvironment(options: HostOptions): NodeJS.ProcessEnv {
  const environment: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    FHIRGATE_DATA_DIR: options.dataDir,
    FHIRGATE_BASE_URL: BASE_URL,
    AI_PROVIDER: 'openai-compatible',
    AI_API_BASE: `${options.emulatorUrl}/v1`,
    AI_MODEL: 'bench-model',
    AI_API_KEY: 'bench',
    LOG_LEVEL: 'warn',
  };
  // Rate limits in memory: the benchmark measures the store, not Redis.
  delete environment.REDIS_URL;
  return environment;
}

/** Resolves with the pattern's first group once the child prints it; a child that never does is killed. */
async function waitForOutput(child: ChildProcess, stream: 'stdout' | 'stderr', pattern: RegExp, name: string): Promise<string> {
  // Both pipes are drained for the child's whole life: a full pipe would block it.
  child.stdout?.resume();
  child.stderr?.resume();
  try {
    return await matchOutput(child, stream, pattern, name);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
}

async function matchOutput(child: ChildProcess, stream: 'stdout' | 'stderr', pattern: RegExp, name: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`${name} did not start: ${output}`)), 120_000);
    child[stream]?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const found = pattern.exec(output);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code}: ${output}`));
    });
  });
}
