/**
 * Child processes of the benchmark: started pinned to a core with `taskset` where it exists, so the contender
 * never competes with the load generator for a core; their CPU time and memory read from /proc.
 */
import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/** Which cores each role runs on; undefined cores mean "not pinned". */
export interface CoreLayout {
  readonly contenderCore?: number;
  readonly generatorCore?: number;
  readonly description: string;
}

/** Contender alone on the last core; emulator, load generator and orchestrator share core 0. */
export function planCoreLayout(): CoreLayout {
  const cores = availableParallelism();
  const hasTaskset = process.platform === 'linux' && spawnSync('taskset', ['--version']).status === 0;
  if (!hasTaskset || cores < 2) {
    return { description: `not pinned (${hasTaskset ? `${cores} core` : 'taskset not available'})` };
  }
  const contenderCore = cores - 1;
  return {
    contenderCore,
    generatorCore: 0,
    description: `taskset: contender on core ${contenderCore}; emulator and load generator on core 0 (${cores} cores)`,
  };
}

export interface StartOptions {
  readonly core?: number;
  readonly env?: NodeJS.ProcessEnv;
  readonly stdio?: StdioOptions;
}

/**
 * Starts `node <args>` (the Node running the bench), pinned when a core is given. `taskset` execs the command, so
 * the child's pid is the Node process's pid: /proc readings are the contender's own.
 */
export function startNodeProcess(args: readonly string[], options: StartOptions = {}): ChildProcess {
  const command = options.core === undefined ? process.execPath : 'taskset';
  const commandArgs = options.core === undefined ? [...args] : ['-c', String(options.core), process.execPath, ...args];
  return spawn(command, commandArgs, { env: options.env ?? process.env, stdio: options.stdio ?? ['ignore', 'pipe', 'pipe'] });
}

/** The standalone host's entry point. */
const HOST_ENTRY = 'plugin/hosts/standalone/main.ts';

/**
 * `node` arguments that start the standalone host as its users start it: the Node flags of its `#!` line (which the
 * `fhirgate` command and `npm start` both use), then `extraFlags` (a profiler, say), then the entry point.
 */
export function standaloneHostArgs(extraFlags: readonly string[] = []): string[] {
  const firstLine = readFileSync(HOST_ENTRY, 'utf8').split('\n', 1)[0] ?? '';
  const hostFlags = firstLine.startsWith('#!') ? firstLine.split(/\s+/).filter((word) => word.startsWith('--')) : [];
  return [...hostFlags, ...extraFlags, HOST_ENTRY];
}

/** Resolves with the first match of `pattern` in the stream's accumulated output; rejects on exit or timeout. */
export function waitForOutput(child: ChildProcess, stream: 'stdout' | 'stderr', pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let output = '';
    const source = child[stream];
    if (!source) {
      reject(new Error(`${stream} of the child is not piped`));
      return;
    }
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) finish(() => resolve(match));
    };
    const onExit = (code: number | null): void => finish(() => reject(new Error(`process exited (${code}) before ${pattern}: ${output.slice(-2000)}`)));
    const timer = setTimeout(() => finish(() => reject(new Error(`timed out waiting for ${pattern}: ${output.slice(-2000)}`))), timeoutMs);
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      source.off('data', onData);
      child.off('exit', onExit);
      settle();
    };
    source.on('data', onData);
    child.once('exit', onExit);
  });
}

/** SIGTERM, then SIGKILL after a grace period; resolves when the process is gone. */
export async function stopProcess(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

const CLOCK_TICKS_PER_SECOND = readClockTicks();

function readClockTicks(): number {
  const result = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const ticks = Number.parseInt(result.stdout ?? '', 10);
  return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
}

/** User + system CPU seconds the process has used so far (Linux /proc); NaN elsewhere. */
export function readCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces; the fields after its closing parenthesis are fixed.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const userTicks = Number(fields[11]);
    const systemTicks = Number(fields[12]);
    return (userTicks + systemTicks) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/** The process's resident set size in bytes (VmRSS); NaN when unreadable. */
export function readResidentBytes(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Samples VmRSS every `intervalMs` until stopped; `stop()` returns the peak seen. */
export function sampleResidentPeak(pid: number, intervalMs = 50): { stop: () => number } {
  let peak = readResidentBytes(pid);
  const timer = setInterval(() => {
    const current = readResidentBytes(pid);
    // NaN (the process is gone) never replaces a reading.
    if (Number.isFinite(current) && !(current <= peak)) peak = current;
  }, intervalMs);
  return {
    stop: (): number => {
      clearInterval(timer);
      const last = readResidentBytes(pid);
      return Number.isFinite(last) && !(last <= peak) ? last : peak;
    },
  };
}
