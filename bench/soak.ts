/**
 * The soak: the host as `npm start` runs it (fresh data folder, GraphQL available, the demo device configured)
 * under a mixed load for a long time, to see whether it holds its pace as the store grows. 16 clients of the
 * demo practitioner continue conversations of their own, half streaming, four about a care-team patient; the demo
 * device posts an Observation through `/graphql` every 250 ms (bench/soak/soak-load.ts, its own process). Every
 * window: turns per second, latency p50/p99, the host's event-loop delay and resident memory. At the end the
 * stored records are counted through the FHIR API (the demo integration's client) against what was answered.
 *
 *   node bench/soak.ts --out <file.json> [--minutes 15] [--window-seconds 30] [--smoke]
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { readGeneratedMetricsToken } from '../plugin/hosts/standalone/secret-files.ts';
import { DEMO_CATEGORY_CODES, countStored } from './soak/stored-records.ts';
import { buildSoakSection, type SoakHostWindow } from './soak/soak-section.ts';
import type { SoakLoadPlan, SoakLoadResult } from './soak/soak-load.ts';
import { demoToken, layout, startHost } from './history/processes.ts';
import { DEMO } from './history/seed-store.ts';
import { RAW_DIRECTORY } from './history/store-cache.ts';
import { startEmulator } from './lib/emulator-process.ts';
import { readEventLoopDelay } from './lib/event-loop-delay.ts';
import { readCpuSeconds, readResidentBytes, startNodeProcess, stopProcess, waitForOutput } from './lib/processes.ts';
import { parseReferenceSamples, samplesBetween } from './lib/reference-load.ts';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    minutes: { type: 'string' },
    'window-seconds': { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
if (!values.out) {
  throw new Error('usage: node bench/soak.ts --out <file.json> [--minutes 15] [--window-seconds 30] [--smoke]');
}
// A smoke run (CI) only checks that the soak works: half a minute in 10-second windows.
const durationSeconds = Math.round(Number(values.minutes ?? (values.smoke ? 0.5 : 15)) * 60);
const windowSeconds = Number(values['window-seconds'] ?? (values.smoke ? 10 : 30));
if (!(durationSeconds >= windowSeconds && windowSeconds > 0)) {
  throw new Error('--minutes must cover at least one window of --window-seconds');
}
const USERS = 16;
const DEVICE_PERIOD_MS = 250;
mkdirSync(RAW_DIRECTORY, { recursive: true });

const dataDir = mkdtempSync(join(RAW_DIRECTORY, 'soak-work-'));
const emulator = await startEmulator(layout.generatorCore);
const host = await startHost({ dataDir, emulatorUrl: emulator.url });
// The fixed-cost reference on the host's core: what the machine's own drift does to a unit of work that never grows.
const reference = startNodeProcess(['bench/lib/reference-load.ts', '1000'], { core: layout.contenderCore });
let referenceOutput = '';
reference.stdout?.on('data', (chunk: Buffer) => (referenceOutput += chunk.toString()));
let section;
try {
  await emulator.setBehaviour({ latencyMs: 0, replyTokens: 20 });
  const environment = { ...process.env, FHIRGATE_DATA_DIR: dataDir, FHIRGATE_BASE_URL: 'http://fhirgate.bench.test/' };
  const tokenCommand = (flag: string): Promise<string> => run(process.execPath, ['plugin/hosts/standalone/print-token.ts', flag], { env: environment }).then((result) => result.stdout.trim());
  const plan: SoakLoadPlan = {
    url: host.url,
    projectId: DEMO.projectId,
    token: await demoToken(dataDir),
    users: USERS,
    streamingUsers: USERS / 2,
    patientUsers: USERS / 4,
    patientId: DEMO.patients[0].slice('Patient/'.length),
    device: JSON.parse(await tokenCommand('--device')) as SoakLoadPlan['device'],
    devicePeriodMs: DEVICE_PERIOD_MS,
    durationSeconds,
    windowSeconds,
  };
  const client = JSON.parse(await tokenCommand('--client')) as { client_id: string; client_secret: string };
  const metricsToken = readGeneratedMetricsToken(dataDir);
  const pid = host.child.pid ?? -1;

  const load = startNodeProcess(['bench/soak/soak-load.ts', JSON.stringify(plan)], { core: layout.generatorCore });
  let stdout = '';
  load.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  await waitForOutput(load, 'stderr', /soak load started/, 30_000);
  let stderr = '';
  load.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => load.once('exit', resolve));
  // The host's side of each window, read at the window's end.
  await readEventLoopDelay(host.url, metricsToken);
  const hostWindows: SoakHostWindow[] = [];
  const windowsStarted = performance.now();
  let cpuBefore = readCpuSeconds(pid);
  let windowStartedAt = Date.now();
  for (let window = 1; window * windowSeconds <= durationSeconds; window++) {
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, windowsStarted + window * windowSeconds * 1000 - performance.now())));
    const eventLoop = await readEventLoopDelay(host.url, metricsToken);
    const cpu = readCpuSeconds(pid);
    const endedAt = Date.now();
    const referenceMicros = samplesBetween(parseReferenceSamples(referenceOutput), windowStartedAt, endedAt).map((sample) => sample.cpuMicros);
    hostWindows.push({ eventLoop, residentBytes: readResidentBytes(pid), cpuSeconds: cpu - cpuBefore, referenceMicros });
    cpuBefore = cpu;
    windowStartedAt = endedAt;
    process.stderr.write(`[soak] window ${window}: event loop p99 ${eventLoop.p99Ms.toFixed(1)} ms\n`);
  }
  const code = await exited;
  if (code !== 0) {
    throw new Error(`soak load exited with ${code}: ${stderr.slice(-2000)}`);
  }
  const result = JSON.parse(stdout) as SoakLoadResult;
  const stored = await countStored(host.url, client, DEMO_CATEGORY_CODES);
  section = buildSoakSection({ plan, load: result, hostWindows, stored, pinned: layout.contenderCore !== undefined, smoke: values.smoke });
} finally {
  await stopProcess(reference, 5_000);
  await stopProcess(host.child, 30_000);
  await emulator.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
writeFileSync(values.out, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${values.out}: ${section.targets.map((target) => `${target.description}: ${target.measured} ${target.met ? 'met' : 'MISSED'}`).join('; ')}\n`);
