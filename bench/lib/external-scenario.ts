/**
 * Scenarios other scripts own (`bench/history.ts`, `bench/devices.ts`, `bench/scale.ts`, `bench/soak.ts`): each is
 * run as its own process with `--out <file> [--smoke]` (and its own arguments) and writes one ScenarioSection as
 * JSON. A missing script or a failed run is reported, never fatal to the rest of the bench.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { ScenarioSection } from './section.ts';

const run = promisify(execFile);

export type ExternalOutcome = { readonly section: ScenarioSection } | { readonly reason: string };

export async function runExternalScenario(script: string, outFile: string, smoke: boolean, timeoutMs: number, extraArgs: readonly string[] = []): Promise<ExternalOutcome> {
  if (!existsSync(script)) return { reason: `${script} does not exist yet.` };
  try {
    await run(process.execPath, [script, '--out', outFile, ...(smoke ? ['--smoke'] : []), ...extraArgs], { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return { reason: `${script} failed: ${detail.slice(0, 1500)}` };
  }
  try {
    const section = JSON.parse(await readFile(outFile, 'utf8')) as ScenarioSection;
    if (typeof section.title !== 'string' || !Array.isArray(section.targets) || !section.table) {
      return { reason: `${script} wrote ${outFile}, but it is not a ScenarioSection.` };
    }
    return { section };
  } catch (error) {
    return { reason: `${script} wrote no readable ${outFile}: ${String(error)}` };
  }
}
