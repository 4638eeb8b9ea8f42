/**
 * Scenario 5, History: the latency of a chat request continuing a conversation with 1,000 earlier turns against
 * a fresh conversation, in a store holding 1,000,000 other Communications against an empty one.
 *
 *   node bench/history.ts --out <file.json> [--smoke] [--cpu-profile <dir>]
 *
 * Each store gets its own standalone host; the hosts, the LLM emulator and the load are separate processes (hosts
 * on core 1; emulator and load on core 0). Seeded stores are cached under bench/results/raw/ and copied for each
 * run, since requests write to them.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { LoadCase } from './history/load-runner.ts';
import { buildHistorySection, type StoreMeasurement } from './history/history-section.ts';
import { demoToken, layout, runLoadRunner, startHost, type RunningHost } from './history/processes.ts';
import { startEmulator } from './lib/emulator-process.ts';
import { stopProcess } from './lib/processes.ts';
import { DEMO, type SeedPlan } from './history/seed-store.ts';
import { RAW_DIRECTORY, cachedStore, copyForRun, type CachedStore } from './history/store-cache.ts';

/** Sizes of a run. */
export interface HistoryRunSize {
  readonly longConversationTurns: number;
  readonly otherCommunications: number;
  readonly warmUp: number;
  readonly repetitions: number;
  readonly requestsPerRepetition: number;
}

// Five repetitions of 200: with three of 100 the fresh case's store-size verdict moved from 4.3 % to 10.3 % between
// two full runs of one tree (bench/findings.md, "The journal's pieces in one write per turn of the event loop").
const FULL: HistoryRunSize = { longConversationTurns: 1000, otherCommunications: 1_000_000, warmUp: 50, repetitions: 5, requestsPerRepetition: 200 };
const SMOKE: HistoryRunSize = { longConversationTurns: 50, otherCommunications: 10_000, warmUp: 3, repetitions: 3, requestsPerRepetition: 10 };

const { values } = parseArgs({
  options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false }, 'cpu-profile': { type: 'string' } },
});
if (!values.out) {
  throw new Error('usage: node bench/history.ts --out <file.json> [--smoke] [--cpu-profile <dir>]');
}
const size = values.smoke ? SMOKE : FULL;
mkdirSync(RAW_DIRECTORY, { recursive: true });

const stores = [
  { label: 'empty', otherCommunications: 0 },
  { label: 'large', otherCommunications: size.otherCommunications },
];
const prepared: PreparedStore[] = [];
const emulator = await startEmulator(layout.generatorCore);
const hosts: RunningHost[] = [];
let measurements: StoreMeasurement[];
try {
  for (const store of stores) {
    prepared.push(await prepareStore(store.label, store.otherCommunications));
  }
  // Both hosts run side by side and the load alternates between them, request by request: whatever else the
  // machine does during the run falls on both stores alike.
  const cases: LoadCase[] = [];
  for (const store of prepared) {
    const profileDir = values['cpu-profile'] ? join(values['cpu-profile'], store.label) : undefined;
    const host = await startHost({ dataDir: store.workDir, emulatorUrl: emulator.url, cpuProfileDir: profileDir });
    hosts.push(host);
    const token = await demoToken(store.workDir);
    cases.push(
      { name: `${store.label}/fresh`, url: host.url, token, conversationIds: store.cached.seeded.freshConversationIds },
      { name: `${store.label}/long`, url: host.url, token, conversationIds: [store.cached.seeded.longConversationId] }
    );
  }
  const result = await runLoadRunner({
    projectId: DEMO.projectId,
    cases,
    warmUp: size.warmUp,
    repetitions: size.repetitions,
    requestsPerRepetition: size.requestsPerRepetition,
  });
  measurements = prepared.map((store) => ({
    label: store.label,
    otherCommunications: store.otherCommunications,
    seeded: store.cached.seeded,
    seededNow: store.cached.seededNow,
    copySeconds: store.copySeconds,
    samples: { fresh: result.samples[`${store.label}/fresh`], long: result.samples[`${store.label}/long`] },
  }));
} finally {
  // A host asked for a CPU profile writes it as it exits: give it time.
  await Promise.all(hosts.map((host) => stopProcess(host.child, 30_000)));
  await emulator.stop();
  for (const store of prepared) {
    rmSync(store.workDir, { recursive: true, force: true });
  }
}
const section = buildHistorySection(size, measurements, layout.contenderCore !== undefined);
writeFileSync(values.out, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${values.out}: ${section.targets.map((target) => `${target.description}: ${target.measured} ${target.met ? 'met' : 'MISSED'}`).join('; ')}\n`);

interface PreparedStore {
  readonly label: string;
  readonly otherCommunications: number;
  readonly cached: CachedStore;
  readonly workDir: string;
  readonly copySeconds: number;
}

/** The cached seeded store (seeded first if needed), copied into a data folder of its own for this run. */
async function prepareStore(label: string, otherCommunications: number): Promise<PreparedStore> {
  const freshNeeded = size.warmUp + size.repetitions * size.requestsPerRepetition;
  const plan: SeedPlan = { longConversationTurns: size.longConversationTurns, freshConversations: freshNeeded, otherCommunications };
  const cached = await cachedStore(`${values.smoke ? 'smoke' : 'full'}-${label}`, plan);
  const { workDir, copySeconds } = copyForRun(cached.directory, `history-work-${label}`);
  return { label, otherCommunications, cached, workDir, copySeconds };
}
