/**
 * `npm run bench`: every contender side by side against one loopback LLM emulator, each in its own process, the
 * load generator in another, pinned apart with taskset where it exists. Writes report.md, chart.svg and raw/ to
 * the output directory (bench/results by default).
 *
 *   node bench/run.ts [--smoke] [--only 1,2,...] [--out-dir DIR] [--profile] [--data-root DIR] [--fhirgate-node-flag F] [--repetitions N]
 *   node bench/run.ts --soak [--soak-minutes M] [--out-dir DIR]
 *
 * --smoke: tiny counts and one repetition, every contender and scenario; exits 1 when a scenario failed or any
 *   contender answered with an error (CI runs it after the tests to keep the bench working; it judges no timing).
 * --profile: fhirgate runs with --cpu-prof, its .cpuprofile in <out-dir>/raw/profiles/; the floor (SDK relay + store)
 *   too, in raw/profiles/floor/.
 * --data-root DIR: where fhirgate's fresh data directory is made (an experiment: /dev/shm makes fsync free).
 * --fhirgate-node-flag F: an extra node flag for fhirgate (repeatable), e.g. --max-old-space-size=384.
 * --repetitions N: repetitions per scenario (3 by default, 1 in a smoke run).
 * --soak: the soak alone (bench/soak.ts, 15 minutes unless --soak-minutes says otherwise), written to soak.md; a smoke
 *   run of every scenario (no --only) includes a half-minute soak.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Contender } from './contenders/contender.ts';
import { FHIRGATE_HOST_DIFFERENCES, startFhirgate } from './contenders/start-fhirgate.ts';
import { directContender, startPortkey, startSdkRelay, startSdkRelayWithStore, startUndiciProxy } from './contenders/start-proxies.ts';
import { startEmulator, type EmulatorProcess } from './lib/emulator-process.ts';
import { runExternalScenario } from './lib/external-scenario.ts';
import { planCoreLayout, standaloneHostArgs } from './lib/processes.ts';
import type { ScenarioSection } from './lib/section.ts';
import { PROFILE_ON_SIGNAL } from './profile/profile-file.ts';
import { mergeRerun, readEarlierRun, type RunRecord } from './lib/rerun.ts';
import { findSmokeProblems, type MissingScenario } from './lib/smoke-check.ts';
import { readCpuTimes, readMachineFacts, stolenPercent } from './report/machine-facts.ts';
import { sampleOtherProcesses } from './report/other-processes.ts';
import { renderReport } from './report/render-report.ts';
import { renderChart } from './report/svg-chart.ts';
import { measureAddedLatency } from './scenarios/added-latency.ts';
import { measureCostByPart } from './scenarios/cost-by-part.ts';
import type { BenchContext } from './scenarios/bench-context.ts';
import { measureManyStreams } from './scenarios/many-streams.ts';
import { measureRepositoryOperations } from './scenarios/repository-operations.ts';
import { measureStreaming } from './scenarios/streaming.ts';
import { measureThroughput, THROUGHPUT_CONNECTIONS } from './scenarios/throughput.ts';

const { values } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    only: { type: 'string' },
    'out-dir': { type: 'string' },
    profile: { type: 'boolean', default: false },
    repetitions: { type: 'string' },
    'data-root': { type: 'string' },
    'fhirgate-node-flag': { type: 'string', multiple: true },
    soak: { type: 'boolean', default: false },
    'soak-minutes': { type: 'string' },
    rerun: { type: 'string' },
  },
});
const smoke = values.smoke ?? false;
const soakOnly = values.soak ?? false;
// --rerun: these scenarios only, put into the earlier run of the out-dir (bench/lib/rerun.ts).
const rerunIds = values.rerun?.split(',').map((part) => part.trim()).filter((part) => part !== '');
const only = new Set(soakOnly ? [] : (rerunIds?.join(',') ?? values.only ?? '0,1,2,3,4,5,6,7,8,9,10,11,12,13,14').split(',').map((part) => part.trim()));
// A smoke run must never overwrite the committed report.
const outDirectory = values['out-dir'] ?? (smoke ? 'bench/results/raw/smoke' : 'bench/results');
const rawDirectory = join(outDirectory, 'raw');
const repetitions = Number(values.repetitions ?? (smoke ? 1 : 3));

const OWN_SCENARIOS: readonly { readonly id: string; readonly measure: (context: BenchContext) => Promise<ScenarioSection> }[] = [
  { id: '1', measure: measureAddedLatency },
  { id: '2', measure: measureThroughput },
  { id: '3', measure: measureStreaming },
  { id: '4', measure: measureManyStreams },
  { id: '8', measure: measureRepositoryOperations },
  { id: '14', measure: measureCostByPart },
];
/** fhirgate's measured requests rotate through this many prepared conversations (about 50 turns each by the end), the floor's through as many. */
const FHIRGATE_CONVERSATIONS = 128;
const FINDINGS_FILE = 'bench/findings.md';
const EXTERNAL_SCENARIOS = [
  { id: '5', title: '5. History', script: 'bench/history.ts' },
  { id: '6', title: '6. Devices', script: 'bench/devices.ts' },
  { id: '7', title: '7. Scale', script: 'bench/scale.ts' },
  { id: '0', title: '0. Start-up and the first /graphql', script: 'bench/cold-start.ts' },
  { id: '9', title: '9. Governance: patient data egress', script: 'bench/patient-data-egress.ts' },
  { id: '10', title: '10. Governance: model access and budgets', script: 'bench/model-access-and-budgets.ts' },
  { id: '11', title: '11. Web app', script: 'bench/web-app.ts' },
  { id: '12', title: '12. MCP server', script: 'bench/mcp.ts' },
  { id: '13', title: '13. Bytes per turn', script: 'bench/bytes-per-turn/measure.ts' },
];
/** The soak: with --soak alone (its own report file), and in every smoke run. */
const SOAK = { id: 'Soak', title: 'Soak', script: 'bench/soak.ts' };
const soakMinutes = Number(values['soak-minutes'] ?? 15);
// A smoke run of every scenario includes a short soak; one asked for some scenarios (--only) does not.
const runSoak = soakOnly || (smoke && values.only === undefined);

const startedAt = new Date();
const cpuAtStart = readCpuTimes();
/** The standalone host's own Node flags (main.ts's `#!` line): fhirgate's, and the floor's. */
const HOST_NODE_FLAGS = standaloneHostArgs().slice(0, -1);
// What the rest of the machine used meanwhile: a run beside another job is not a quiet one (the report says so).
const otherProcesses = sampleOtherProcesses(process.pid, availableParallelism());
function log(line: string): void {
  const elapsed = ((Date.now() - startedAt.getTime()) / 1000).toFixed(0).padStart(4);
  process.stderr.write(`[bench ${elapsed}s] ${line}\n`);
}

async function runOwnScenarios(sections: ScenarioSection[], missing: MissingScenario[]): Promise<void> {
  const scenarios = OWN_SCENARIOS.filter((scenario) => only.has(scenario.id));
  if (scenarios.length === 0) return;
  const layout = planCoreLayout();
  let emulator: EmulatorProcess | undefined;
  const contenders: Contender[] = [];
  try {
    log(`layout: ${layout.description}`);
    emulator = await startEmulator(layout.generatorCore);
    log(`emulator at ${emulator.url}`);
    contenders.push(directContender(emulator.url));
    contenders.push(await startUndiciProxy(emulator.url, layout.contenderCore));
    log('undici proxy started');
    contenders.push(await startSdkRelay(emulator.url, layout.contenderCore, [PROFILE_ON_SIGNAL]));
    log('SDK relay started');
    // Profiled beside fhirgate, so the two compare turn for turn (bench/profile-summary.ts --per). It runs with the
    // standalone host's own Node flags (main.ts's `#!` line: its young generation and heap growth), as fhirgate does:
    // the floor is fhirgate's store at its least, so it keeps the same memory bounds. With Node's defaults it spent
    // about a quarter less CPU a turn, on a heap three times the size (595 MB resident against 211).
    const floorFlags = [
      ...HOST_NODE_FLAGS,
      PROFILE_ON_SIGNAL,
      ...(values.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(rawDirectory, 'profiles', 'floor')}`] : []),
    ];
    const conversations = smoke ? THROUGHPUT_CONNECTIONS : FHIRGATE_CONVERSATIONS;
    contenders.push(await startSdkRelayWithStore(emulator.url, layout.contenderCore, { conversations, dataRoot: values['data-root'], nodeFlags: floorFlags }));
    log('SDK relay + store started');
    contenders.push(await startPortkey(emulator.url, layout.contenderCore));
    log('Portkey started');
    await emulator.setBehaviour({ latencyMs: 0, replyTokens: 20 });
    const profileFlags = [PROFILE_ON_SIGNAL, ...(values.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(rawDirectory, 'profiles')}`] : []), ...(values['fhirgate-node-flag'] ?? [])];
    contenders.push(await startFhirgate({ emulatorUrl: emulator.url, core: layout.contenderCore, conversations, nodeFlags: profileFlags, dataRoot: values['data-root'] }));
    log('fhirgate started, conversations prepared');
    const context: BenchContext = { contenders, emulator, layout, smoke, repetitions, rawDirectory, log };
    for (const scenario of scenarios) {
      log(`scenario ${scenario.id}`);
      try {
        sections.push(await scenario.measure(context));
      } catch (error) {
        log(`scenario ${scenario.id} failed: ${String(error)}`);
        missing.push({ id: scenario.id, title: `Scenario ${scenario.id}`, reason: `failed: ${error instanceof Error ? error.message : String(error)}` });
      }
    }
  } finally {
    // The contender of interest last in, first out; each stop waits for the process to exit.
    for (const contender of contenders.reverse()) await contender.stop().catch((error: unknown) => log(`stopping ${contender.name}: ${String(error)}`));
    await emulator?.stop();
  }
}

async function runExternalScenarios(sections: ScenarioSection[], missing: MissingScenario[]): Promise<void> {
  const scenarios = [...EXTERNAL_SCENARIOS.filter((external) => only.has(external.id)), ...(runSoak ? [SOAK] : [])];
  for (const scenario of scenarios) {
    log(`scenario ${scenario.id} (${scenario.script})`);
    const soak = scenario === SOAK;
    // The soak runs as long as it is asked to, plus start-up and the final count; scenario 7 seeds a large store.
    const timeoutMs = smoke ? 180_000 : soak ? (soakMinutes + 10) * 60_000 : scenario.id === '7' || scenario.id === '11' ? 1_800_000 : 600_000;
    const extraArgs = soak && !smoke ? ['--minutes', String(soakMinutes)] : [];
    const outcome = await runExternalScenario(scenario.script, join(rawDirectory, `scenario-${scenario.id}.json`), smoke, timeoutMs, extraArgs);
    if ('section' in outcome) sections.push(outcome.section);
    else {
      log(`scenario ${scenario.id}: ${outcome.reason}`);
      missing.push({ id: scenario.id, title: scenario.title, reason: outcome.reason });
    }
  }
}

await mkdir(rawDirectory, { recursive: true });
// Read before anything runs: a rerun into a folder with no earlier run stops here.
const reportFile = join(outDirectory, soakOnly ? 'soak.md' : 'report.md');
const earlier = rerunIds ? readEarlierRun(rawDirectory, reportFile) : undefined;
let sections: ScenarioSection[] = [];
let missing: MissingScenario[] = [];
await runOwnScenarios(sections, missing);
await runExternalScenarios(sections, missing);
const durationSeconds = (Date.now() - startedAt.getTime()) / 1000;
const othersCpu = otherProcesses.stop();
let record: RunRecord = { startedAt: startedAt.toISOString(), durationSeconds, stolenPercent: stolenPercent(cpuAtStart, readCpuTimes()), otherProcesses: othersCpu, missing };
if (earlier && rerunIds) {
  ({ sections, record } = mergeRerun(earlier, rerunIds, { sections, missing, at: startedAt.toISOString(), durationSeconds, otherProcesses: othersCpu }));
  missing = [...record.missing];
}

const panels = sections.flatMap((section) => (section.chart ? [section.chart] : []));
const chartFile = panels.length > 0 ? 'chart.svg' : undefined;
if (chartFile) await writeFile(join(outDirectory, chartFile), renderChart(panels));
const report = renderReport({
  startedAt: record.startedAt,
  durationSeconds: record.durationSeconds,
  reruns: record.reruns,
  smoke,
  machine: readMachineFacts(),
  stolenPercent: record.stolenPercent,
  otherProcesses: record.otherProcesses,
  layout: planCoreLayout().description,
  fhirgateNodeFlags: standaloneHostArgs(values['fhirgate-node-flag'] ?? []).slice(0, -1),
  floorNodeFlags: HOST_NODE_FLAGS,
  fhirgateHost: FHIRGATE_HOST_DIFFERENCES,
  sections,
  missing,
  chartFile,
  appendix: !soakOnly && existsSync(FINDINGS_FILE) ? await readFile(FINDINGS_FILE, 'utf8') : undefined,
});
// The soak alone has a report of its own, so it never replaces the scenarios' report.
await writeFile(reportFile, report);
await writeFile(join(rawDirectory, soakOnly ? 'soak-sections.json' : 'sections.json'), `${JSON.stringify(sections, null, 2)}\n`);
if (!soakOnly) await writeFile(join(rawDirectory, 'run.json'), `${JSON.stringify(record, null, 2)}\n`);
log(`report written to ${reportFile}`);

if (smoke) {
  const requested = [...[...OWN_SCENARIOS, ...EXTERNAL_SCENARIOS].map((scenario) => scenario.id).filter((id) => only.has(id)), ...(runSoak ? [SOAK.id] : [])];
  const problems = findSmokeProblems(requested, sections, missing);
  for (const problem of problems) log(`smoke run failed: ${problem}`);
  if (problems.length > 0) process.exitCode = 1;
  else log(`smoke run passed: scenarios ${requested.join(', ')} answered without an error`);
}
