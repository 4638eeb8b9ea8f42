/**
 * Scenario 7, Scale: a chat turn about a care-team patient whose chart holds 10,000 Observations, in a project
 * holding 100,000 more (other patients, monitors) and with 100,000 other Communications of the caller, against the
 * same turn on a small store (the same chart with 20 Observations, nothing else); and how late each host's event
 * loop ran while the turns were measured.
 *
 *   node bench/scale.ts --out <file.json> [--smoke] [--cpu-profile <dir>] [--requests N]
 *
 * --requests N: measured requests per repetition per store (100 by default, at most), for a shorter run.
 *
 * Built as scenario 5 is (bench/history.ts): seeded stores cached under bench/results/raw/ and copied for each
 * run, one host per store side by side, the load alternating between them request by request. Each request
 * continues a conversation of its own about the patient, so every turn does the same work: the chart summary
 * (the patient_context default), the conversation's history, prompt, reply and the disclosure's AuditEvent.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { readGeneratedMetricsToken } from '../plugin/hosts/standalone/secret-files.ts';
import type { LoadCase, LoadPlan } from './history/load-runner.ts';
import { demoToken, layout, runLoadRunner, startHost, type RunningHost } from './history/processes.ts';
import { DEMO } from './history/seed-store.ts';
import { RAW_DIRECTORY, STORE_SOURCES, cachedSeed, copyForRun } from './history/store-cache.ts';
import { startEmulator } from './lib/emulator-process.ts';
import { readEventLoopDelay, type EventLoopDelay } from './lib/event-loop-delay.ts';
import { stopProcess } from './lib/processes.ts';
import { buildScaleSection, type ScaleMeasurement } from './scale/scale-section.ts';
import { seedScaleStore, type ScalePlan } from './scale/seed-chart.ts';

/** Sizes of a run. */
export interface ScaleRunSize {
  readonly large: Omit<ScalePlan, 'measuredConversations' | 'earlierTurns'>;
  readonly small: Omit<ScalePlan, 'measuredConversations' | 'earlierTurns'>;
  readonly earlierTurns: number;
  readonly warmUp: number;
  readonly repetitions: number;
  readonly requestsPerRepetition: number;
}

const FULL: ScaleRunSize = {
  large: { chartObservations: 10_000, otherObservations: 100_000, callerCommunications: 100_000 },
  small: { chartObservations: 20, otherObservations: 0, callerCommunications: 0 },
  earlierTurns: 5,
  warmUp: 20,
  repetitions: 3,
  requestsPerRepetition: 100,
};
// CI's smoke run: small enough to seed in seconds, never the real store.
const SMOKE: ScaleRunSize = {
  large: { chartObservations: 200, otherObservations: 1_000, callerCommunications: 500 },
  small: { chartObservations: 20, otherObservations: 0, callerCommunications: 0 },
  earlierTurns: 2,
  warmUp: 3,
  repetitions: 3,
  requestsPerRepetition: 10,
};
/** The patient the turns are about: Maria Lopez, in the demo practitioner's care team. */
const PATIENT_ID = DEMO.patients[0].slice('Patient/'.length);
const SOURCES = [...STORE_SOURCES, 'bench/scale/seed-chart.ts', 'bench/scale/chart-resources.ts', 'bench/history/bulk-communications.ts', 'plugin/chat/communication-builders.ts'];

const { values } = parseArgs({
  options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false }, 'cpu-profile': { type: 'string' }, requests: { type: 'string' } },
});
if (!values.out) {
  throw new Error('usage: node bench/scale.ts --out <file.json> [--smoke] [--cpu-profile <dir>] [--requests N]');
}
const baseSize = values.smoke ? SMOKE : FULL;
const size: ScaleRunSize = values.requests ? { ...baseSize, requestsPerRepetition: Number(values.requests) } : baseSize;
mkdirSync(RAW_DIRECTORY, { recursive: true });

interface PreparedStore {
  readonly label: 'small' | 'large';
  readonly plan: ScalePlan;
  readonly conversationIds: readonly string[];
  readonly resources: Readonly<Record<string, number>>;
  readonly note: string;
  readonly workDir: string;
}

const emulator = await startEmulator(layout.generatorCore);
const prepared: PreparedStore[] = [];
const hosts: RunningHost[] = [];
let measurements: ScaleMeasurement[];
try {
  for (const label of ['small', 'large'] as const) {
    prepared.push(await prepareStore(label));
  }
  const started = await Promise.all(
    prepared.map(async (store) => {
      const profileDir = values['cpu-profile'] ? join(values['cpu-profile'], store.label) : undefined;
      const host = await startHost({ dataDir: store.workDir, emulatorUrl: emulator.url, cpuProfileDir: profileDir });
      hosts.push(host);
      return { store, host, token: await demoToken(store.workDir), metricsToken: readGeneratedMetricsToken(store.workDir) };
    })
  );
  const casesFor = (range: [number, number]): LoadCase[] =>
    started.map(({ store, host, token }) => ({
      name: store.label,
      url: host.url,
      token,
      conversationIds: store.conversationIds.slice(...range),
      body: { patient_id: PATIENT_ID, patient_context: 'summary' },
    }));
  const load = (plan: Omit<LoadPlan, 'projectId'>) => runLoadRunner({ projectId: DEMO.projectId, ...plan });
  await load({ cases: casesFor([0, size.warmUp]), warmUp: size.warmUp, repetitions: 0, requestsPerRepetition: 0 });
  // The event loop is read from here on: the warm-up's first requests (JIT, caches) are not the turn measured.
  await Promise.all(started.map(({ host, metricsToken }) => readEventLoopDelay(host.url, metricsToken)));
  const result = await load({ cases: casesFor([size.warmUp, Infinity]), warmUp: 0, repetitions: size.repetitions, requestsPerRepetition: size.requestsPerRepetition });
  const delays: EventLoopDelay[] = await Promise.all(started.map(({ host, metricsToken }) => readEventLoopDelay(host.url, metricsToken)));
  measurements = started.map(({ store }, index) => ({
    label: store.label,
    plan: store.plan,
    resources: store.resources,
    note: store.note,
    samples: result.samples[store.label],
    eventLoop: delays[index],
  }));
} finally {
  // A host asked for a CPU profile writes it as it exits: give it time.
  await Promise.all(hosts.map((host) => stopProcess(host.child, 30_000)));
  await emulator.stop();
  for (const store of prepared) {
    rmSync(store.workDir, { recursive: true, force: true });
  }
}
const section = buildScaleSection(size, measurements, layout.contenderCore !== undefined, values.smoke);
writeFileSync(values.out, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${values.out}: ${section.targets.map((target) => `${target.description}: ${target.measured} ${target.met ? 'met' : 'MISSED'}`).join('; ')}\n`);

/** The cached seeded store of `label` (seeded first if needed), copied into a data folder of its own for this run. */
async function prepareStore(label: 'small' | 'large'): Promise<PreparedStore> {
  // Sized for a run of the default length, so that a shorter one (--requests) reuses the same store.
  const plan: ScalePlan = { ...size[label], earlierTurns: size.earlierTurns, measuredConversations: baseSize.warmUp + baseSize.repetitions * baseSize.requestsPerRepetition };
  const cached = await cachedSeed(`scale-store-${values.smoke ? 'smoke' : 'full'}-${label}`, plan, seedScaleStore, SOURCES);
  const { workDir, copySeconds } = copyForRun(cached.directory, `scale-work-${label}`);
  const total = Object.values(cached.seeded.resources).reduce((sum, count) => sum + count, 0);
  const note =
    `Store "${label}": ${total.toLocaleString('en-US')} resources bulk-loaded with the store's own index rows in ${cached.seeded.seedSeconds.toFixed(1)} s ` +
    `(${Object.entries(cached.seeded.resources).map(([type, count]) => `${count.toLocaleString('en-US')} ${type}`).join(', ')}), ` +
    `${cached.seededNow ? 'seeded by this run' : 'reused from bench/results/raw/ (seeded by an earlier run)'}; copied, flushed and read into the page cache in ${copySeconds.toFixed(1)} s.`;
  return { label, plan, conversationIds: cached.seeded.measuredConversationIds, resources: cached.seeded.resources, note, workDir };
}
