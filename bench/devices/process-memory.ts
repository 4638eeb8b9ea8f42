/** A process's resident memory, read from /proc (Linux): what operators see of the host. */
import { readFile } from 'node:fs/promises';

/** VmRSS (now) and VmHWM (peak so far), in kB. */
export interface ProcessMemory {
  readonly rssKb: number;
  readonly peakKb: number;
}

/** The memory of process `pid`; undefined where /proc cannot be read (not Linux, or the process is gone). */
export async function readProcessMemory(pid: number | undefined): Promise<ProcessMemory | undefined> {
  if (pid === undefined) {
    return undefined;
  }
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  if (status === undefined) {
    return undefined;
  }
  const kilobytes = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssKb: kilobytes('VmRSS'), peakKb: kilobytes('VmHWM') };
}
