/** The facts a reader needs to compare a report with another machine's. */
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, totalmem, type as osType, release } from 'node:os';

export interface MachineFacts {
  readonly cpuModel: string;
  readonly cores: number;
  readonly memoryGigabytes: number;
  readonly operatingSystem: string;
  readonly nodeVersion: string;
  readonly portkeyVersion: string;
}

function readPackageVersion(path: string): string {
  try {
    return (JSON.parse(readFileSync(path, 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'not installed';
  }
}

/** The machine's CPU time so far, all cores together, in clock ticks (the first line of /proc/stat). */
export interface CpuTimes {
  readonly total: number;
  /** Time the hypervisor gave to other guests while this machine had work: high on a busy host. */
  readonly steal: number;
}

/** The `cpu` line of /proc/stat's text: user nice system idle iowait irq softirq steal (guest time is in user). */
export function parseCpuTimes(procStat: string): CpuTimes | undefined {
  const fields = /^cpu\s+(.*)$/m.exec(procStat)?.[1]?.trim().split(/\s+/).map(Number);
  if (!fields || fields.length < 8 || fields.some((field) => !Number.isFinite(field))) return undefined;
  const counted = fields.slice(0, 8);
  return { total: counted.reduce((sum, field) => sum + field, 0), steal: counted[7] ?? 0 };
}

/** The machine's CPU times now; undefined where /proc/stat is not there (not Linux). */
export function readCpuTimes(): CpuTimes | undefined {
  try {
    return parseCpuTimes(readFileSync('/proc/stat', 'utf8'));
  } catch {
    return undefined;
  }
}

/** The share of the machine's CPU time stolen by the hypervisor between two readings, in percent. */
export function stolenPercent(start: CpuTimes | undefined, end: CpuTimes | undefined): number | undefined {
  if (!start || !end || end.total <= start.total) return undefined;
  return (100 * (end.steal - start.steal)) / (end.total - start.total);
}

export function readMachineFacts(): MachineFacts {
  return {
    cpuModel: cpus()[0]?.model ?? 'unknown',
    cores: availableParallelism(),
    memoryGigabytes: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    operatingSystem: `${osType()} ${release()}`,
    nodeVersion: process.version,
    portkeyVersion: readPackageVersion('node_modules/@portkey-ai/gateway/package.json'),
  };
}
