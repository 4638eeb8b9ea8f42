/**
 * The bench's side of profile-on-signal.ts: start a contender's profiler, and stop it and read the profile.
 */
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CpuProfile } from './cost-by-part.ts';
import { profileFile } from './profile-file.ts';

/** Starts the profiler of the process `pid` (preloaded with profile-on-signal.ts); resolves once it runs. */
export async function startProfiling(pid: number): Promise<void> {
  const file = profileFile(pid);
  await rm(file, { force: true });
  await rm(`${file}.started`, { force: true });
  process.kill(pid, 'SIGUSR2');
  await waitFor(`${file}.started`, pid);
  await rm(`${file}.started`, { force: true });
}

/** Stops the profiler of the process `pid` and returns its profile. */
export async function stopProfiling(pid: number): Promise<CpuProfile> {
  const file = profileFile(pid);
  process.kill(pid, 'SIGUSR2');
  await waitFor(file, pid);
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  await rm(file, { force: true });
  return profile;
}

async function waitFor(file: string, pid: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} did not answer the profiling signal (is it preloaded with bench/profile/profile-on-signal.ts?)`);
    await sleep(20);
  }
}
