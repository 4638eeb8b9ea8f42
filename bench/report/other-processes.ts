/**
 * The CPU that processes outside the bench used while it ran: a mutation run, a test suite or a build on the same
 * two cores takes CPU from the contenders and the load generator alike, and a contender whose turn is made of more
 * threads and more garbage loses more of its throughput than a cheap one. The hypervisor's steal does not show it
 * (it is this machine's own work), so the report says it next to the steal, and a reader knows a run was not quiet.
 *
 * Every second the sampler reads each process's CPU time (/proc/PID/stat, utime + stime) and its parent; a process
 * whose ancestors include the bench's own (the contenders, the emulator, the browsers) counts as the bench's, any
 * other as outside. Only CPU used between two readings of the same process counts: a process that starts and ends
 * within a second is missed, which the figure is a floor of.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** One process's reading: its parent and its CPU time so far, in clock ticks. */
export interface ProcessReading {
  readonly parent: number;
  readonly ticks: number;
}

/** Every process's reading at one moment, by process id. */
export type ProcessSnapshot = ReadonlyMap<number, ProcessReading>;

/** The fields of /proc/PID/stat this needs: the parent (4th) and utime + stime (14th, 15th). */
export function parseProcessStat(stat: string): ProcessReading | undefined {
  // The command name (2nd field) is in parentheses and may hold spaces or parentheses: read after the last `)`.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const parent = Number(fields[1]);
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isInteger(parent) && Number.isFinite(ticks) ? { parent, ticks } : undefined;
}

/** Whether `pid` is `root` or descends from it in `snapshot`. */
function descendsFrom(snapshot: ProcessSnapshot, pid: number, root: number): boolean {
  let current: number | undefined = pid;
  // A parent chain is short; the bound only guards against a loop in a torn reading.
  for (let steps = 0; current !== undefined && current > 0 && steps < 64; steps += 1) {
    if (current === root) return true;
    current = snapshot.get(current)?.parent;
  }
  return false;
}

/** CPU ticks used between two snapshots, by the bench's process tree (rooted at `root`) and by every other process. */
export function cpuBetween(before: ProcessSnapshot, after: ProcessSnapshot, root: number): { bench: number; outside: number } {
  let bench = 0;
  let outside = 0;
  for (const [pid, reading] of after) {
    const earlier = before.get(pid);
    // A new process, or a reused id (its parent changed): nothing of it is known from before.
    if (!earlier || earlier.parent !== reading.parent || reading.ticks < earlier.ticks) continue;
    const used = reading.ticks - earlier.ticks;
    if (descendsFrom(after, pid, root)) bench += used;
    else outside += used;
  }
  return { bench, outside };
}

/** Every process's reading now; empty where /proc is not there (not Linux). */
export function readProcessSnapshot(): ProcessSnapshot {
  const snapshot = new Map<number, ProcessReading>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return snapshot;
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const reading = parseProcessStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      if (reading) snapshot.set(pid, reading);
    } catch {
      // Ended between the listing and the read.
    }
  }
  return snapshot;
}

/** What the sampler found: core-seconds used outside the bench, and that as a share of the machine's capacity. */
export interface OtherProcessesCpu {
  readonly outsideSeconds: number;
  /** Percent of all cores' time over the sampled span. */
  readonly outsidePercent: number;
  /** The busiest 10 s window's share, in percent: a short burst (a build) averaged away over a long run shows here. */
  readonly peakWindowPercent: number;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;
const WINDOW_SAMPLES = 10;

/** Samples every `intervalMs` until stopped; `stop()` says what processes outside `root`'s tree used meanwhile. */
export function sampleOtherProcesses(root: number, cores: number, intervalMs = 1_000, read: () => ProcessSnapshot = readProcessSnapshot): { stop: () => OtherProcessesCpu | undefined } {
  const started = Date.now();
  let previous = read();
  const perInterval: number[] = [];
  const timer = setInterval(() => {
    const current = read();
    perInterval.push(cpuBetween(previous, current, root).outside);
    previous = current;
  }, intervalMs);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      const current = read();
      perInterval.push(cpuBetween(previous, current, root).outside);
      const elapsedSeconds = (Date.now() - started) / 1000;
      if (previous.size === 0 || elapsedSeconds <= 0) return undefined;
      const outsideSeconds = perInterval.reduce((sum, ticks) => sum + ticks, 0) / TICKS_PER_SECOND;
      let peakTicks = 0;
      for (let start = 0; start < perInterval.length; start += 1) {
        const window = perInterval.slice(start, start + WINDOW_SAMPLES).reduce((sum, ticks) => sum + ticks, 0);
        peakTicks = Math.max(peakTicks, window);
      }
      const windowSeconds = Math.min(WINDOW_SAMPLES, perInterval.length) * (intervalMs / 1000);
      return {
        outsideSeconds,
        outsidePercent: (100 * outsideSeconds) / (elapsedSeconds * cores),
        peakWindowPercent: (100 * peakTicks) / TICKS_PER_SECOND / (windowSeconds * cores),
      };
    },
  };
}
