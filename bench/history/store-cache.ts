/**
 * Seeded store files are cached under `bench/results/raw/` (gitignored), keyed by a fingerprint of everything
 * that shapes their rows: the seed plan, the schema version, the search index, the fixture and the code that
 * builds the rows. A second run with the same fingerprint reuses the file instead of seeding again.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadFhirDefinitions } from '../../plugin/hosts/standalone/fhir-definitions.ts';
import { STORE_SCHEMA_VERSION } from '../../plugin/hosts/standalone/store/schema.ts';
import { SearchIndexSpec } from '../../plugin/hosts/standalone/store/search-index.ts';
import { seedStore, type SeedPlan, type SeededStore } from './seed-store.ts';

/** Where raw benchmark files go. */
export const RAW_DIRECTORY = 'bench/results/raw';

const SOURCES_THAT_SHAPE_ROWS = [
  'bench/history/seed-store.ts',
  'bench/history/bulk-communications.ts',
  'plugin/chat/communication-builders.ts',
  'plugin/chat/fhir-vocabulary.ts',
  'plugin/hosts/standalone/store/schema.ts',
  'plugin/hosts/standalone/store/search-index.ts',
  'fixtures/demo-project.json',
];

/** A seeded store file, ready to copy. */
export interface CachedStore {
  readonly directory: string;
  readonly seeded: SeededStore;
  /** True when this run seeded it; false when an earlier run's file was reused. */
  readonly seededNow: boolean;
}

/** The cached store for `plan`, seeded first when no run has built it yet. */
export async function cachedStore(label: string, plan: SeedPlan): Promise<CachedStore> {
  const prefix = `history-store-${label}-`;
  const directory = join(RAW_DIRECTORY, `${prefix}${fingerprintOf(plan)}`);
  const manifest = join(directory, 'seeded.json');
  if (existsSync(manifest)) {
    return { directory, seeded: JSON.parse(readFileSync(manifest, 'utf8')) as SeededStore, seededNow: false };
  }
  // A large store is gigabytes: files seeded for an older fingerprint of the same label go before a new one is built.
  for (const stale of readdirSync(RAW_DIRECTORY).filter((name) => name.startsWith(prefix))) {
    rmSync(join(RAW_DIRECTORY, stale), { recursive: true, force: true });
  }
  const building = `${directory}.building-${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true });
  try {
    const seeded = await seedStore(building, plan);
    writeFileSync(join(building, 'seeded.json'), JSON.stringify(seeded));
    rmSync(directory, { recursive: true, force: true });
    renameSync(building, directory);
    return { directory, seeded, seededNow: true };
  } catch (error) {
    rmSync(building, { recursive: true, force: true });
    throw error;
  }
}

function fingerprintOf(plan: SeedPlan): string {
  loadFhirDefinitions();
  const hash = createHash('sha256');
  hash.update(JSON.stringify(plan));
  hash.update(`schema ${STORE_SCHEMA_VERSION}\n${new SearchIndexSpec().fingerprint}\n`);
  for (const source of SOURCES_THAT_SHAPE_ROWS) {
    hash.update(readFileSync(source));
  }
  return hash.digest('hex').slice(0, 16);
}
