/**
 * The history benchmark's standalone hosts, started with the bench's shared process helpers (bench/lib/): each its
 * own process, pinned with `taskset` where it exists (hosts on the contender core; emulator and load on core 0).
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { openHostLog } from '../lib/host-log.ts';
import { planCoreLayout, standaloneHostArgs, startNodeProcess, waitForOutput } from '../lib/processes.ts';
import type { LoadPlan, LoadResult } from './load-runner.ts';

const run = promisify(execFile);
/** The host signs tokens for this issuer; the token command must use the same one. */
const BASE_URL = 'http://fhirgate.bench.test/';

/** Where each role runs. */
export const layout = planCoreLayout();

/** A host process and its URL. */
export interface RunningHost {
  readonly child: ChildProcess;
  readonly url: string;
}

/** What the host runs with. */
export interface HostOptions {
  readonly dataDir: string;
  readonly emulatorUrl: string;
  /** Write a V8 CPU profile of the host into this folder when it exits. */
  readonly cpuProfileDir?: string;
}

/** Starts the standalone host; resolves with its URL once it is listening. */
export async function startHost(options: HostOptions): Promise<RunningHost> {
  const profile = options.cpuProfileDir ? ['--cpu-prof', '--cpu-prof-dir', options.cpuProfileDir] : [];
  // The log as `npm start` writes it (info: a line per request), to a file in the data folder (host-log.ts).
  const log = openHostLog(join(options.dataDir, 'host.log'));
  const child = startNodeProcess(standaloneHostArgs(profile), { core: layout.contenderCore, env: hostEnvironment(options), stdio: log.stdio });
  log.started();
  try {
    // The banner on stdout names the address; stdout is drained for the child's whole life (a full pipe blocks it).
    const match = await waitForOutput(child, 'stdout', /fhirgate is listening on (\S+)/, 120_000);
    child.stdout?.resume();
    return { child, url: match[1] };
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
}

/** An access token for the demo practitioner, signed with the keys in the data folder. */
export async function demoToken(dataDir: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts'], {
    env: { ...process.env, FHIRGATE_BASE_URL: BASE_URL, FHIRGATE_DATA_DIR: dataDir },
  });
  return stdout.trim();
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
    // The emulator answers on loopback: cleared for patient data (the conversations are about a patient).
    AI_PATIENT_DATA_MODELS: '*',
  };
  // Rate limits in memory: the benchmark measures the store, not Redis. `npm start`'s log level.
  delete environment.REDIS_URL;
  delete environment.LOG_LEVEL;
  return environment;
}

/** Runs the load runner (load-runner.ts) with `plan` as its own process on the generator's core. */
export async function runLoadRunner(plan: LoadPlan): Promise<LoadResult> {
  const child = startNodeProcess(['bench/history/load-runner.ts', JSON.stringify(plan)], { core: layout.generatorCore });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) {
    throw new Error(`load runner exited with ${code}: ${stderr}`);
  }
  return JSON.parse(stdout) as LoadResult;
}
