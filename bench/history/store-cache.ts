/**
 * Seeded store files are cached under `bench/results/raw/` (gitignored), keyed by a fingerprint of everything
 * that shapes their rows: the seed plan, the schema version, the search index, the fixture and the code that
 * builds the rows. A second run with the same fingerprint reuses the file instead of seeding again.
 */
import { createHash } from 'node:crypto';
import { closeSync, constants, copyFileSync, existsSync, fsyncSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadFhirDefinitions } from '../../plugin/hosts/standalone/fhir-definitions.ts';
import { STORE_FILE_NAME } from '../../plugin/hosts/standalone/open-store.ts';
import { STORE_SCHEMA_VERSION } from '../../plugin/hosts/standalone/store/schema.ts';
import { SearchIndexSpec } from '../../plugin/hosts/standalone/store/search-index.ts';
import { seedStore, type SeedPlan, type SeededStore } from './seed-store.ts';

/** Where raw benchmark files go. */
export const RAW_DIRECTORY = 'bench/results/raw';

/** Files whose change changes the rows of any seeded store. */
export const STORE_SOURCES = [
  'bench/lib/bulk-store.ts',
  'plugin/hosts/standalone/store/schema.ts',
  'plugin/hosts/standalone/store/search-index.ts',
  'fixtures/demo-project.json',
];

const SOURCES_THAT_SHAPE_ROWS = [
  ...STORE_SOURCES,
  'bench/history/seed-store.ts',
  'bench/history/bulk-communications.ts',
  'plugin/chat/communication-builders.ts',
  'plugin/chat/fhir-vocabulary.ts',
];

/** A seeded store file, ready to copy. */
export interface CachedStore<Seeded = SeededStore> {
  readonly directory: string;
  readonly seeded: Seeded;
  /** True when this run seeded it; false when an earlier run's file was reused. */
  readonly seededNow: boolean;
}

/** The cached store of the history benchmark for `plan`, seeded first when no run has built it yet. */
export async function cachedStore(label: string, plan: SeedPlan): Promise<CachedStore> {
  return cachedSeed(`history-store-${label}`, plan, seedStore, SOURCES_THAT_SHAPE_ROWS);
}

/**
 * The cached store `name` for `plan`, seeded with `seed` into an empty folder first when no run has built it yet
 * (for this plan and these `sources`).
 */
export async function cachedSeed<Plan, Seeded>(
  name: string,
  plan: Plan,
  seed: (directory: string, plan: Plan) => Promise<Seeded>,
  sources: readonly string[]
): Promise<CachedStore<Seeded>> {
  const prefix = `${name}-`;
  const directory = join(RAW_DIRECTORY, `${prefix}${fingerprintOf(plan, sources)}`);
  const manifest = join(directory, 'seeded.json');
  if (existsSync(manifest)) {
    return { directory, seeded: JSON.parse(readFileSync(manifest, 'utf8')) as Seeded, seededNow: false };
  }
  // A large store is gigabytes: files seeded for an older fingerprint of the same label go before a new one is built.
  for (const stale of readdirSync(RAW_DIRECTORY).filter((name) => name.startsWith(prefix))) {
    rmSync(join(RAW_DIRECTORY, stale), { recursive: true, force: true });
  }
  const building = `${directory}.building-${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true });
  try {
    const seeded = await seed(building, plan);
    writeFileSync(join(building, 'seeded.json'), JSON.stringify(seeded));
    rmSync(directory, { recursive: true, force: true });
    renameSync(building, directory);
    return { directory, seeded, seededNow: true };
  } catch (error) {
    rmSync(building, { recursive: true, force: true });
    throw error;
  }
}

function fingerprintOf(plan: unknown, sources: readonly string[]): string {
  loadFhirDefinitions();
  const hash = createHash('sha256');
  hash.update(JSON.stringify(plan));
  hash.update(`schema ${STORE_SCHEMA_VERSION}\n${new SearchIndexSpec().fingerprint}\n`);
  for (const source of sources) {
    hash.update(readFileSync(source));
  }
  return hash.digest('hex').slice(0, 16);
}

/** A copy of a cached store in a data folder of its own, for one run (requests write to it). */
export interface WorkingCopy {
  readonly workDir: string;
  readonly copySeconds: number;
}

/**
 * Copies the cached store in `directory` into a new data folder under RAW_DIRECTORY (named after `label`), flushed
 * to disk and read once into the page cache.
 */
export function copyForRun(directory: string, label: string): WorkingCopy {
  const workDir = mkdtempSync(join(RAW_DIRECTORY, `${label}-`));
  const copyStarted = performance.now();
  const copy = join(workDir, STORE_FILE_NAME);
  copyFileSync(join(directory, STORE_FILE_NAME), copy, constants.COPYFILE_FICLONE);
  // Flushed before the host starts: otherwise the copy's gigabytes are written back while the host's own
  // fsyncs (synchronous=FULL) are being measured, and the first checkpoint waits for all of them.
  const descriptor = openSync(copy, 'r+');
  fsyncSync(descriptor);
  closeSync(descriptor);
  readThrough(copy);
  return { workDir, copySeconds: (performance.now() - copyStarted) / 1000 };
}

/**
 * Reads the file once so that it sits in the OS page cache, as a store in service would: otherwise the first
 * touch of each random index page during the measurement is a disk read, and the large store measures the disk.
 */
function readThrough(path: string): void {
  const descriptor = openSync(path, 'r');
  try {
    const buffer = Buffer.allocUnsafe(16 * 1024 * 1024);
    while (readSync(descriptor, buffer, 0, buffer.length, null) > 0) {
      // reading is the point
    }
  } finally {
    closeSync(descriptor);
  }
}
