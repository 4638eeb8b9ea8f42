/** What every scenario gets from the orchestrator. */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Contender, ContenderName } from '../contenders/contender.ts';
import type { EmulatorProcess } from '../lib/emulator-process.ts';
import type { CoreLayout } from '../lib/processes.ts';

export interface BenchContext {
  readonly contenders: readonly Contender[];
  readonly emulator: EmulatorProcess;
  readonly layout: CoreLayout;
  /** Tiny counts, one repetition: checks that everything runs, measures nothing worth reading. */
  readonly smoke: boolean;
  readonly repetitions: number;
  readonly rawDirectory: string;
  /** Progress lines for whoever watches the run. */
  log(line: string): void;
}

/** Runs `measure` for each repetition and each contender, interleaved, so slow drift of the machine hits all alike. */
export async function measureInterleaved<Result>(
  context: BenchContext,
  contenders: readonly Contender[],
  measure: (contender: Contender, repetition: number) => Promise<Result>,
): Promise<Map<ContenderName, Result[]>> {
  const results = new Map<ContenderName, Result[]>(contenders.map((contender) => [contender.name, []]));
  for (let repetition = 0; repetition < context.repetitions; repetition += 1) {
    for (const contender of contenders) {
      context.log(`  repetition ${repetition + 1}/${context.repetitions}: ${contender.name}`);
      results.get(contender.name)?.push(await measure(contender, repetition));
    }
  }
  return results;
}

/** Keeps every repetition's raw numbers beside the report (bench/results/raw/, not committed). */
export async function writeRaw(context: BenchContext, name: string, value: unknown): Promise<void> {
  await writeFile(join(context.rawDirectory, `${name}.json`), `${JSON.stringify(value, null, 2)}\n`);
}

/** The contender with this name, if it is part of the run. */
export function findContender(contenders: readonly Contender[], name: ContenderName): Contender | undefined {
  return contenders.find((contender) => contender.name === name);
}
