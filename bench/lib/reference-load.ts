/**
 * A reference load of fixed cost, run beside a long measurement to tell the machine's drift from the contender's
 * own work growing. Every `periodMs` it does the same unit of work (JSON written and read back, a hash, a walk over
 * a 32 MB array that misses the caches) and prints the main thread's CPU time for it, in µs, with the time it ended
 * (ms since the epoch), one JSON line a unit. The unit costs about 15 ms here, so beside a contender on the same
 * core it takes about 1.5 % of that core, the same in every window. Its CPU time rises when the core, its caches or
 * the memory behind them slow down; it cannot rise because the contender's data grew.
 *
 *   node bench/lib/reference-load.ts [periodMs]
 */
import { createHash } from 'node:crypto';

/** A unit's CPU time and when it ended. */
export interface ReferenceSample {
  /** When the unit ended, ms since the epoch. */
  readonly at: number;
  readonly cpuMicros: number;
}

/** The samples that ended in [fromMs, toMs) (ms since the epoch). */
export function samplesBetween(samples: readonly ReferenceSample[], fromMs: number, toMs: number): ReferenceSample[] {
  return samples.filter((sample) => sample.at >= fromMs && sample.at < toMs);
}

/** Parses the lines a reference load printed; partial or foreign lines are skipped. */
export function parseReferenceSamples(output: string): ReferenceSample[] {
  const samples: ReferenceSample[] = [];
  for (const line of output.split('\n')) {
    try {
      const value = JSON.parse(line) as Partial<ReferenceSample>;
      if (typeof value.at === 'number' && typeof value.cpuMicros === 'number') samples.push({ at: value.at, cpuMicros: value.cpuMicros });
    } catch {
      // not a sample
    }
  }
  return samples;
}

const WALK_ENTRIES = 8 * 1024 * 1024;
const WALK_STEPS = 100_000;

/** The records the unit writes and reads: shaped like a page of stored messages. */
function records(): object[] {
  return Array.from({ length: 50 }, (_, index) => ({
    resourceType: 'Communication',
    id: `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`,
    meta: { versionId: String(index), lastUpdated: '2026-01-01T00:00:00.000Z' },
    status: 'completed',
    payload: [{ contentString: 'The quick brown fox jumps over the lazy dog. '.repeat(8) }],
    extension: Array.from({ length: 6 }, (__, item) => ({ url: `https://fhirgate.dev/fhir/StructureDefinition/x-${item}`, valueString: `value ${item}` })),
  }));
}

function unit(page: readonly object[], walk: Uint32Array): number {
  let check = 0;
  for (let round = 0; round < 2; round++) {
    const text = JSON.stringify(page);
    const parsed = JSON.parse(text) as object[];
    check += parsed.length + createHash('sha256').update(text).digest()[0];
  }
  // A walk by a fixed pseudo-random permutation: each step a likely cache miss.
  let position = 0;
  for (let step = 0; step < WALK_STEPS; step++) position = walk[position];
  return check + position;
}

async function main(): Promise<void> {
  const periodMs = Number(process.argv[2] ?? 1000);
  // Whoever reads the samples may stop reading first.
  process.stdout.on('error', () => process.exit(0));
  const page = records();
  // One cycle through all entries (Sattolo's shuffle), from a fixed seed: the same walk in every run.
  const walk = new Uint32Array(WALK_ENTRIES);
  for (let index = 0; index < WALK_ENTRIES; index++) walk[index] = index;
  let seed = 12345;
  for (let index = WALK_ENTRIES - 1; index > 0; index--) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const other = seed % index;
    [walk[index], walk[other]] = [walk[other], walk[index]];
  }
  let sink = 0;
  for (;;) {
    const before = process.threadCpuUsage();
    sink += unit(page, walk);
    const used = process.threadCpuUsage(before);
    process.stdout.write(`${JSON.stringify({ at: Date.now(), cpuMicros: used.user + used.system })}\n`);
    // Reads the results, so that no unit's work can be left out as unused.
    if (sink === -1) process.stdout.write('\n');
    await new Promise((resolve) => setTimeout(resolve, periodMs));
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
