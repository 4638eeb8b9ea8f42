#!/usr/bin/env node
/**
 * Benchmark 6, devices:
 *   node bench/devices.ts --out <file.json> [--smoke] [--cpu-profile <dir>]
 * Starts the standalone host as its own process (pinned to its core), then, from a load generator on the other
 * core: device token issuances per second, and the same `ObservationCreate` through fhirgate's `/graphql` (the
 * spec's dialect, a device token) and through Medplum's own `/fhir/R4/$graphql` (Medplum's dialect, the demo
 * integration's token) on the same store. Warm-up first, then repetitions; the section reports medians, and one
 * request of each kind is read back to show both store the same Observation. Also the two GraphQL engines alone,
 * in-process on an in-memory repository (`devices/engine-only.ts`), which separates what `plugin/graphql` costs
 * from what the store costs per write. `--cpu-profile` writes the host's CPU profile (`node --cpu-prof`) into the
 * folder.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { text } from 'node:stream/consumers';
import { planCoreLayout, startNodeProcess } from './lib/processes.ts';
import type { ScenarioSection } from './lib/section.ts';
import { median } from './lib/statistics.ts';
import { runLoad } from './load/run-load.ts';
import type { ThroughputResult } from './load/load-job.ts';
import { BENCH_RATE_LIMIT_PER_SECOND, DEMO_DEVICE_ID, deviceToken, startDeviceHost, type DeviceHost } from './devices/device-host.ts';
import { buildDevicesSection, type DevicesMeasurements } from './devices/devices-section.ts';
import type { EngineOnlyResult } from './devices/engine-only.ts';
import { compareResults, medplumBody, specBody } from './devices/observation-mutations.ts';
import { readProcessMemory, type ProcessMemory } from './devices/process-memory.ts';

const { values } = parseArgs({ options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false }, 'cpu-profile': { type: 'string' } } });
if (!values.out) {
  throw new Error('usage: node bench/devices.ts --out <file.json> [--smoke] [--cpu-profile <dir>]');
}
const outFile = resolve(values.out);
// The host, the token command and the load generator are started by path from the repository's root.
process.chdir(resolve(dirname(fileURLToPath(import.meta.url)), '..'));

const plan = values.smoke
  ? { repetitions: 3, warmupSeconds: 0.5, durationSeconds: 1, connections: 8, engineRequests: 50 }
  : { repetitions: 3, warmupSeconds: 3, durationSeconds: 10, connections: 8, engineRequests: 1000 };
const cores = planCoreLayout();
const profileDir = values['cpu-profile'] ? resolve(values['cpu-profile']) : undefined;
if (profileDir) {
  mkdirSync(profileDir, { recursive: true });
}

// The engines alone first, on the contender's core, before the host takes it.
const engineOnly = await measureEnginesAlone(plan.engineRequests);
const host = await startDeviceHost(cores.contenderCore, profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
let section: ScenarioSection;
try {
  // The host's resident memory once it is up (the token and client calls of start-up included), and after the runs.
  const afterStart = await readProcessMemory(host.process.pid);
  section = await measure(host, engineOnly);
  section = { ...section, notes: [...section.notes, hostMemoryNote(afterStart, await readProcessMemory(host.process.pid))] };
} finally {
  await host.close();
}
mkdirSync(dirname(outFile), { recursive: true });
writeFileSync(outFile, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${section.title}: written to ${outFile}\n`);

function hostMemoryNote(afterStart: ProcessMemory | undefined, afterRuns: ProcessMemory | undefined): string {
  const megabytes = (kilobytes: number | undefined): string => (kilobytes === undefined ? 'n/a' : `${Math.round(kilobytes / 1024)} MB`);
  return (
    `Host memory (VmRSS): ${megabytes(afterStart?.rssKb)} once started, ${megabytes(afterRuns?.rssKb)} after all runs ` +
    `(peak ${megabytes(afterRuns?.peakKb)}); node bench/devices/host-memory.ts measures it around 2,000 device mutations alone.`
  );
}

async function measureEnginesAlone(requests: number): Promise<EngineOnlyResult> {
  const child = startNodeProcess(['bench/devices/engine-only.ts', String(requests)], { core: cores.contenderCore });
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', resolveExit));
  const [stdout, stderr, code] = await Promise.all([text(child.stdout ?? process.stdin), text(child.stderr ?? process.stdin), exited]);
  if (code !== 0) {
    throw new Error(`engine-only measurement failed (${code}): ${stderr.slice(-2000)}`);
  }
  return JSON.parse(stdout) as EngineOnlyResult;
}

async function measure(deviceHost: DeviceHost, engineOnly: EngineOnlyResult): Promise<ScenarioSection> {
  const token = await deviceToken(deviceHost);
  // First: both sides answer, and answer the same (Medplum's handler builds its whole schema here, before any run).
  const comparison = await compareResults(deviceHost, token);
  const jsonHeaders = { 'Content-Type': 'application/json' };
  const scenarios = {
    tokens: { url: `${deviceHost.url}account/api/token/device/`, headers: jsonHeaders, bodies: [JSON.stringify({ device_id: DEMO_DEVICE_ID, api_key: deviceHost.deviceKey })] },
    fhirgate: { url: `${deviceHost.url}graphql`, headers: { ...jsonHeaders, Authorization: `Bearer ${token}` }, bodies: [specBody()] },
    medplum: { url: `${deviceHost.url}fhir/R4/$graphql`, headers: { ...jsonHeaders, Authorization: `Bearer ${deviceHost.clientToken}` }, bodies: [medplumBody()] },
  } as const;
  const runs: Record<keyof typeof scenarios, ThroughputResult[]> = { tokens: [], fhirgate: [], medplum: [] };
  for (let repetition = 0; repetition < plan.repetitions; repetition += 1) {
    for (const name of Object.keys(scenarios) as (keyof typeof scenarios)[]) {
      const result = await runLoad<ThroughputResult>(
        { kind: 'throughput', ...scenarios[name], connections: plan.connections, warmupSeconds: plan.warmupSeconds, durationSeconds: plan.durationSeconds },
        cores.generatorCore,
      );
      runs[name].push(result);
    }
  }
  const summarise = (results: readonly ThroughputResult[]): DevicesMeasurements['tokens'] => ({
    requestsPerSecond: median(results.map((result) => result.requestsPerSecond)),
    latencyP50Ms: median(results.map((result) => result.latencyP50Ms)),
    latencyP99Ms: median(results.map((result) => result.latencyP99Ms)),
    errors: results.reduce((sum, result) => sum + result.errors, 0),
    runs: results.map((result) => result.requestsPerSecond),
  });
  return buildDevicesSection({
    method:
      `Standalone host (${'`npm start`'}'s entry point) on a fresh SQLite store, ${cores.description}. autocannon, ${plan.connections} connections, ` +
      `${plan.warmupSeconds} s warm-up then ${plan.durationSeconds} s measured, ${plan.repetitions} repetitions each, interleaved; medians. ` +
      `One device (the demo device) with rate_limit_per_second raised to ${BENCH_RATE_LIMIT_PER_SECOND} through FHIRGATE_DEVICE_AUTH, so the limit never answers 429. ` +
      `Every ObservationCreate stores a new Observation.${values.smoke ? ' SMOKE RUN: counts too small to quote.' : ''}`,
    tokens: summarise(runs.tokens),
    fhirgate: summarise(runs.fhirgate),
    medplum: summarise(runs.medplum),
    comparison,
    engineOnly,
  });
}
