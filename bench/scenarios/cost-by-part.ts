/**
 * Scenario 14: what a turn costs, part by part, for the SDK relay, the floor (SDK relay + store) and fhirgate, in the
 * same run as the targets they explain. Each of the three is loaded as scenario 2 loads it (32 clients, JSON
 * answers) and then with streamed answers (32 at a time, scenario 3's 100-token replies), V8's sampling profiler
 * running in the contender for the measured load only (bench/profile/profile-on-signal.ts); each sample is given
 * to a part (bench/profile/cost-by-part.ts), and each part's share of the samples is applied to the CPU per turn of
 * the same load run without the profiler.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { costByPart, PARTS } from '../profile/cost-by-part.ts';
import { startProfiling, stopProfiling } from '../profile/profile-control.ts';
import { SAMPLING_INTERVAL_US } from '../profile/profile-file.ts';
import type { Contender } from '../contenders/contender.ts';
import { isFhirgateContender } from '../contenders/start-fhirgate.ts';
import type { ScenarioSection } from '../lib/section.ts';
import { readCpuSeconds } from '../lib/processes.ts';
import { formatNumber, median, ratiosByRound } from '../lib/statistics.ts';
import { runLoad } from '../load/run-load.ts';
import type { StreamsResult, ThroughputResult } from '../load/load-job.ts';
import { writeRaw, type BenchContext } from './bench-context.ts';
import { aboveTheFloor, describeFloorBudget, floorBudget } from './target-budget.ts';

/** What is profiled: a contender and the bodies it is sent. */
interface Subject {
  readonly label: string;
  readonly contender: Contender & { readonly pid: number };
  bodies(stream: boolean): readonly string[];
}

const FLOOR = 'SDK relay + store';
const FHIRGATE_PLAIN = 'fhirgate, no chart';
const FHIRGATE = 'fhirgate, as npm start';

const CLIENTS = 32;
/**
 * Turns added to every conversation of the floor and of fhirgate before anything is measured: with the root and two
 * records a turn, each conversation then holds more than one history page (50 messages), so every measured turn of
 * either reads and sends a full page, whatever the scenarios before had left (a contender whose conversations are
 * shorter would read less and look cheaper).
 */
const FILL_TURNS_PER_CONVERSATION = 26;
const JSON_UPSTREAM = { latencyMs: 0, replyTokens: 20 };
const STREAM_UPSTREAM = { latencyMs: 0, replyTokens: 100 };

/** What one load reported: turns answered, and SSE events per turn when streamed. */
interface LoadRun {
  readonly turns: number;
  readonly eventsPerTurn?: number;
}

interface Profiled {
  /** Turns answered while the profiler ran. */
  readonly turns: number;
  /** SSE events per turn (streamed load only). */
  readonly eventsPerTurn?: number;
  /** The contender's CPU per turn (its /proc utime + stime) over the same load run without the profiler: the median of the rounds. */
  readonly busyPerTurn: number;
  /** Each round's, in order. */
  readonly busyPerTurnByRound: readonly number[];
  /** Each part's share of the profiled samples, times busyPerTurn. */
  readonly perTurn: ReadonlyMap<string, number>;
}

/** Where a profile of this scenario is kept (raw/profiles/scenario-14/), for bench/profile-summary.ts. */
function profilePath(context: BenchContext, label: string, load: string): string {
  return join(context.rawDirectory, 'profiles', 'scenario-14', `${label.replace(/[^a-z0-9]+/gi, '-')}-${load}.cpuprofile`);
}

/** The CPU per turn, µs, of `pid` over one run of `load` (its /proc utime + stime). */
async function cpuPerTurnOf(pid: number, load: () => Promise<LoadRun>): Promise<number> {
  const cpuBefore = readCpuSeconds(pid);
  const run = await load();
  return ((readCpuSeconds(pid) - cpuBefore) * 1e6) / run.turns;
}

/**
 * Runs `load` on the contender `pid` with V8's sampling profiler in it, for how its CPU divides into parts; the amount
 * is `cpuPerTurn`, measured without the profiler (a profiler sampling every SAMPLING_INTERVAL_US slows a turn, most
 * of all a cheap one, so the profile gives the shares and the unprofiled runs the amount).
 */
async function profiled(pid: number, profileFile: string, cpuPerTurn: readonly number[], load: () => Promise<LoadRun>): Promise<Profiled> {
  await startProfiling(pid);
  const run = await load();
  const profile = await stopProfiling(pid);
  await mkdir(dirname(profileFile), { recursive: true });
  await writeFile(profileFile, JSON.stringify(profile));
  const shares = costByPart(profile, run.turns);
  const busyPerTurn = median(cpuPerTurn);
  const scale = busyPerTurn / shares.busyPerTurn;
  return {
    turns: run.turns,
    eventsPerTurn: run.eventsPerTurn,
    busyPerTurn,
    busyPerTurnByRound: cpuPerTurn,
    perTurn: new Map([...shares.perTurn].map(([part, micros]) => [part, micros * scale])),
  };
}

export async function measureCostByPart(context: BenchContext): Promise<ScenarioSection> {
  const subjects: Subject[] = [];
  for (const contender of context.contenders) {
    if (contender.pid === undefined) continue;
    const withPid = contender as Contender & { readonly pid: number };
    if (contender.name === 'SDK relay' || contender.name === FLOOR) subjects.push({ label: contender.name, contender: withPid, bodies: (stream) => contender.bodies(stream) });
    if (isFhirgateContender(contender)) {
      subjects.push({ label: FHIRGATE_PLAIN, contender: withPid, bodies: (stream) => contender.bodiesWithoutChart(stream) });
      subjects.push({ label: FHIRGATE, contender: withPid, bodies: (stream) => contender.bodies(stream) });
    }
  }
  const seconds = context.smoke ? 1 : 6;
  const streams = context.smoke ? 40 : 600;
  const fillTurns = context.smoke ? 1 : FILL_TURNS_PER_CONVERSATION;
  await context.emulator.setBehaviour(JSON_UPSTREAM);
  for (const { label, contender, bodies } of subjects) {
    // fhirgate's two subjects continue conversations of their own (start-fhirgate.ts): each set is filled.
    if (contender.conversations === undefined) continue;
    context.log(`  ${label}: ${fillTurns} turns added to each of its ${contender.conversations} conversations first`);
    const requests = contender.conversations * fillTurns;
    const fill = await runLoad<StreamsResult>(
      { kind: 'streams', url: contender.chatUrl, headers: contender.headers, bodies: bodies(true), concurrency: CLIENTS, warmupRequests: 0, requests, timeoutMs: 60_000 },
      context.layout.generatorCore,
    );
    if (fill.errors > 0) throw new Error(`${label} answered ${fill.errors} turn(s) of the fill with an error: ${fill.firstError}`);
  }
  // Each subject's load, JSON and streamed, each after a warm-up.
  const loads = new Map(
    subjects.map(({ label, contender, bodies }) => {
      const throughputJob = { kind: 'throughput', url: contender.chatUrl, headers: contender.headers, bodies: bodies(false), connections: CLIENTS, warmupSeconds: 0 } as const;
      const streamsJob = { kind: 'streams', url: contender.chatUrl, headers: contender.headers, bodies: bodies(true), concurrency: CLIENTS, warmupRequests: 0, timeoutMs: 60_000 } as const;
      const jsonTurns = async (): Promise<LoadRun> => {
        const load = await runLoad<ThroughputResult>({ ...throughputJob, durationSeconds: seconds }, context.layout.generatorCore);
        if (load.errors > 0) throw new Error(`${label} answered ${load.errors} JSON turn(s) with an error`);
        return { turns: load.completed };
      };
      const streamedTurns = async (): Promise<LoadRun> => {
        const load = await runLoad<StreamsResult>({ ...streamsJob, requests: streams }, context.layout.generatorCore);
        if (load.errors > 0) throw new Error(`${label} answered ${load.errors} streamed turn(s) with an error`);
        return { turns: load.completed, eventsPerTurn: load.events / load.completed };
      };
      const warmJson = async (): Promise<void> => {
        await context.emulator.setBehaviour(JSON_UPSTREAM);
        await runLoad<ThroughputResult>({ ...throughputJob, durationSeconds: context.smoke ? 1 : 2 }, context.layout.generatorCore);
      };
      const warmStreamed = async (): Promise<void> => {
        await context.emulator.setBehaviour(STREAM_UPSTREAM);
        await runLoad<StreamsResult>({ ...streamsJob, requests: Math.ceil(streams / 4) }, context.layout.generatorCore);
      };
      return [label, { jsonTurns, streamedTurns, warmJson, warmStreamed }] as const;
    }),
  );
  // The CPU per turn without the profiler, in rounds that take the subjects in turn: a machine that slows down or
  // speeds up during the scenario weighs on every subject alike, and each figure is the median of its rounds.
  const rounds = context.smoke ? 1 : Math.max(1, context.repetitions);
  const cpu = { json: new Map<string, number[]>(), streamed: new Map<string, number[]>() };
  for (let round = 1; round <= rounds; round++) {
    for (const { label, contender } of subjects) {
      const load = loads.get(label);
      if (!load) continue;
      context.log(`  round ${round}/${rounds}, ${label}: JSON turns, then streamed`);
      await load.warmJson();
      cpu.json.set(label, [...(cpu.json.get(label) ?? []), await cpuPerTurnOf(contender.pid, load.jsonTurns)]);
      await load.warmStreamed();
      cpu.streamed.set(label, [...(cpu.streamed.get(label) ?? []), await cpuPerTurnOf(contender.pid, load.streamedTurns)]);
    }
  }
  const json = new Map<string, Profiled>();
  const streamed = new Map<string, Profiled>();
  for (const { label, contender } of subjects) {
    const load = loads.get(label);
    if (!load) continue;
    context.log(`  ${label}: JSON turns, then streamed, profiled`);
    await load.warmJson();
    json.set(label, await profiled(contender.pid, profilePath(context, label, 'json'), cpu.json.get(label) ?? [], load.jsonTurns));
    await load.warmStreamed();
    streamed.set(label, await profiled(contender.pid, profilePath(context, label, 'streamed'), cpu.streamed.get(label) ?? [], load.streamedTurns));
  }
  const plain = (runs: Map<string, Profiled>) => Object.fromEntries([...runs].map(([name, run]) => [name, { ...run, perTurn: Object.fromEntries(run.perTurn) }]));
  await writeRaw(context, 'scenario-14-cost-by-part', { json: plain(json), streamed: plain(streamed) });

  const table = (runs: Map<string, Profiled>, perChunk: boolean) => {
    const labels = subjects.map((subject) => subject.label);
    const floor = runs.get(FLOOR);
    const plainFhirgate = runs.get(FHIRGATE_PLAIN);
    // A turn's figure, or a chunk's when the table is per streamed chunk.
    const inUnit = (run: Profiled, value: number) => (perChunk ? value / (run.eventsPerTurn ?? 1) : value);
    const figure = (run: Profiled | undefined, value: number | undefined) => (run === undefined || value === undefined ? '—' : formatNumber(inUnit(run, value), 1));
    const difference = (value: (run: Profiled) => number) =>
      floor && plainFhirgate ? formatNumber(inUnit(plainFhirgate, value(plainFhirgate)) - inUnit(floor, value(floor)), 1) : '—';
    const rows: (string | number)[][] = PARTS.filter((part) => labels.some((label) => (runs.get(label)?.perTurn.get(part) ?? 0) >= 0.5)).map((part) => [
      part,
      ...labels.map((label) => figure(runs.get(label), runs.get(label)?.perTurn.get(part))),
      difference((run) => run.perTurn.get(part) ?? 0),
    ]);
    rows.push(["**all of the contender's CPU**", ...labels.map((label) => figure(runs.get(label), runs.get(label)?.busyPerTurn)), difference((run) => run.busyPerTurn)]);
    rows.push(['turns profiled', ...labels.map((label) => runs.get(label)?.turns ?? '—'), '']);
    return rows;
  };
  const columns = (unit: string) => ['part', ...subjects.map((subject) => `${subject.label} ${unit}`), `${FHIRGATE_PLAIN} − floor`];
  return {
    title: '14. What a turn costs, part by part',
    method:
      `First, ${fillTurns} turns are added to every conversation of the floor and of fhirgate (${FILL_TURNS_PER_CONVERSATION} in a full run: then each holds more than one 50-message history page, so every measured turn of either reads and sends a full page, whatever the scenarios before left). ` +
      `fhirgate's turns without the chart continue conversations of their own, begun and filled without it, so that their history pages, like the floor's, hold no reply that carries a chart summary. ` +
      `Then the SDK relay, the floor (SDK relay + store) and fhirgate, each in turn, loaded as in scenario 2 (${CLIENTS} clients, JSON answers, ${seconds} s after a warm-up) ` +
      `and then with ${streams} streamed turns, ${CLIENTS} at a time (100-token replies, after ${Math.ceil(streams / 4)} unprofiled). ` +
      `Each contender's CPU per turn (/proc, utime + stime) is the median of ${rounds} round(s) of both loads without the profiler, the rounds taking the contenders in turn, so that a machine whose speed drifts during the scenario weighs on all alike; ` +
      `then each load is run once more with V8's sampling profiler running inside the contender (${SAMPLING_INTERVAL_US} µs between samples) for that load only. Each sample is given to the innermost ` +
      'frame of its stack that a part claims (bench/profile/cost-by-part.ts: Medplum\'s FHIRPath under the search index counts for the index, under the AccessPolicy for the policy); ' +
      'a part\'s figure is its share of the samples times the CPU per turn of the unprofiled run (the profiler slows a turn, a cheap one most), in µs per turn. ' +
      'The profiles are kept in raw/profiles/scenario-14/ (bench/profile-summary.ts reads them). Throughput and latency are those of scenarios 1–4.',
    table: { columns: columns('µs/turn'), rows: table(json, false) },
    tables: [{ title: 'Streamed turns (100-token replies), µs of CPU per streamed chunk', columns: columns('µs/chunk'), rows: table(streamed, true) }],
    targets: [],
    notes: explain(json, streamed),
  };
}

/** What the chat targets leave per turn, against what the profiled turns spent: the reader sees what would have to go. */
function explain(json: Map<string, Profiled>, streamed: Map<string, Profiled>): string[] {
  const relay = json.get('SDK relay');
  const floor = json.get(FLOOR);
  const plain = json.get(FHIRGATE_PLAIN);
  const full = json.get(FHIRGATE);
  if (!relay || !floor || !plain || !full) return [];
  const micros = (value: number) => `${formatNumber(value, 0)} µs`;
  const storeParts = (run: Profiled) =>
    [...run.perTurn].filter(([part]) => part.startsWith('store:') || part.startsWith("Medplum's validation")).reduce((sum, [, value]) => sum + value, 0);
  const notes = [
    `At ${CLIENTS} clients each contender is bound by its one core, so its requests/s is about 1 s over its CPU per turn. ` +
      `Target 2 (≥ 0.33 × the SDK relay's requests/s) leaves ${micros(relay.busyPerTurn / 0.33)} of CPU a turn (the relay's ${micros(relay.busyPerTurn)} / 0.33). ` +
      `The floor spends ${micros(floor.busyPerTurn)}: Medplum's validation and the store's parts ${micros(storeParts(floor))}, garbage collection ${micros(floor.perTurn.get('garbage collection') ?? 0)}, ` +
      `the provider call ${micros(floor.perTurn.get('provider call (openai SDK, undici)') ?? 0)}.`,
    `fhirgate's turn about a patient as \`npm start\` answers it (the chart summary: its searches, the disclosure AuditEvent, the summary in the prompt) spends ${micros(full.busyPerTurn)}; ` +
      `the same turn with \`patient_context: "none"\` ${micros(plain.busyPerTurn)}, so the chart summary costs ${micros(full.busyPerTurn - plain.busyPerTurn)} a turn. ` +
      `The floor does neither: like for like, fhirgate without the chart is ${micros(plain.busyPerTurn - floor.busyPerTurn)} above it (the last column); ` +
      `point 2's ≥ 0.9 × the floor's requests/s would leave ${micros(floor.busyPerTurn / 0.9)}.`,
    `${describeFloorBudget('Target 2 (≥ 0.33 × the SDK relay\'s requests/s)', floor.perTurn, floorBudget(floor.perTurn, relay.busyPerTurn / 0.33), 'a turn')} ` +
      `(The relay's own provider call is ${micros(relay.perTurn.get(PROVIDER_CALL) ?? 0)}: the rest of the floor's is the history page it sends.)`,
    `Where fhirgate without the chart spends more than the floor, by part (µs a turn): ${listed(aboveTheFloor(plain.perTurn, floor.perTurn))}. ` +
      `What the chart summary adds, by part: ${listed(aboveTheFloor(full.perTurn, plain.perTurn))}, and garbage collection ${micros((full.perTurn.get('garbage collection') ?? 0) - (plain.perTurn.get('garbage collection') ?? 0))}.`,
  ];
  notes.push(
    `CPU per JSON turn in each round, in order (the figures above are their medians): ${[...json]
      .map(([label, run]) => `${label} ${run.busyPerTurnByRound.map((value) => formatNumber(value, 0)).join(' / ')} µs`)
      .join('; ')}.`,
  );
  const byRound = (label: string) => {
    const ratios = ratiosByRound(json.get(label)?.busyPerTurnByRound ?? [], floor.busyPerTurnByRound);
    return `${ratios.map((ratio) => formatNumber(ratio, 2)).join(' / ')} (median ${formatNumber(median(ratios), 2)} ×)`;
  };
  notes.push(
    `fhirgate ÷ the floor, CPU a JSON turn, round by round (each round measures them one after the other, so the machine's drift between rounds weighs on both alike): ` +
      `without the chart ${byRound(FHIRGATE_PLAIN)}, as \`npm start\` ${byRound(FHIRGATE)}.`,
  );
  const floorStream = streamed.get(FLOOR);
  const plainStream = streamed.get(FHIRGATE_PLAIN);
  const fullStream = streamed.get(FHIRGATE);
  if (floorStream?.eventsPerTurn && plainStream?.eventsPerTurn && fullStream?.eventsPerTurn) {
    const perChunk = (run: Profiled) => `${formatNumber(run.busyPerTurn / (run.eventsPerTurn ?? 1), 1)} µs`;
    notes.push(
      `Streamed: the floor spends ${perChunk(floorStream)} a chunk, fhirgate ${perChunk(plainStream)} without the chart and ${perChunk(fullStream)} with it ` +
        `(point 2: ≤ 1.05 × the floor's, ${formatNumber((1.05 * floorStream.busyPerTurn) / floorStream.eventsPerTurn, 1)} µs).`,
    );
    const relayStream = streamed.get('SDK relay');
    if (relayStream?.eventsPerTurn) {
      const chunkParts = perChunkParts(floorStream);
      notes.push(describeFloorBudget("Target 3's CPU per streamed chunk (≤ 1.5 × the SDK relay's)", chunkParts, floorBudget(chunkParts, (1.5 * relayStream.busyPerTurn) / relayStream.eventsPerTurn), 'a chunk', 1));
    }
  }
  return notes;
}

const PROVIDER_CALL = 'provider call (openai SDK, undici)';

/** A streamed run's parts per chunk. */
function perChunkParts(run: Profiled): Map<string, number> {
  return new Map([...run.perTurn].map(([part, value]) => [part, value / (run.eventsPerTurn ?? 1)]));
}

/** The first parts of a list, largest first, as a report lists them. */
function listed(entries: readonly { readonly part: string; readonly extra: number }[]): string {
  const shown = entries.filter((entry) => entry.extra >= 5).slice(0, 6);
  return shown.length === 0 ? 'none above 5 µs' : shown.map((entry) => `${entry.part} ${formatNumber(entry.extra, 0)}`).join('; ');
}
