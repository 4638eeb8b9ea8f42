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
