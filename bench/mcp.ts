#!/usr/bin/env node
/**
 * Scenario 12, the MCP server:
 *   node bench/mcp.ts --out <file.json> [--smoke] [--before-tree <checkout>]
 * Starts the standalone host as its own process (pinned to its core; bench/mcp/mcp-host.ts), with the demo project
 * giving MCP clients patient data and a small chart for Maria Lopez. Each tool's `tools/call`, as the MCP SDK's
 * client sends it in either protocol era (bench/mcp/mcp-requests.ts), the same read on `/fhir/R4` with the same
 * token (the floor), and `tools/list` (an MCP exchange that runs no tool), from a load generator on the other core
 * at a few concurrencies: latency p50/p95/p99 and answers per second, every answer checked. Then hosts under
 * `node --cpu-prof` serve the floor's read, `tools/list` and `read_record` one after the other, and each profile is
 * split by step over each one's window (bench/mcp/profile-split.ts): CPU per call, and where it goes.
 * `--before-tree` also runs a host from another checkout (the tree before a change) beside this one, row by row.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { text } from 'node:stream/consumers';
import { planCoreLayout, startNodeProcess } from './lib/processes.ts';
import { startMcpHost, type McpHost } from './mcp/mcp-host.ts';
import type { McpLoadJob, McpLoadResult } from './mcp/mcp-load.ts';
import { floorRequests, MEASURED_TOOLS, PROTOCOL_ERAS, recordToolLists, recordToolCalls, type PreparedRequest } from './mcp/mcp-requests.ts';
import { buildMcpSection, type LoadRow, type ProfiledCall } from './mcp/mcp-section.ts';
import { splitProfile, type WindowSplit } from './mcp/profile-split.ts';

const { values } = parseArgs({ options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false }, 'before-tree': { type: 'string' } } });
if (!values.out) {
  throw new Error('usage: node bench/mcp.ts --out <file.json> [--smoke] [--before-tree <checkout>]');
}
const outFile = resolve(values.out);
const beforeTree = values['before-tree'] ? resolve(values['before-tree']) : undefined;
// The host, the token command and the load generator are started by path from the repository's root.
process.chdir(resolve(dirname(fileURLToPath(import.meta.url)), '..'));

const smoke = values.smoke ?? false;
const plan = smoke
  ? { concurrencies: [1, 8], warmupSeconds: 0.2, durationSeconds: 0.5, profileSeconds: 1 }
  : { concurrencies: [1, 8, 32], warmupSeconds: 1, durationSeconds: 4, profileSeconds: 6 };
const cores = planCoreLayout();
/** The trees measured: this checkout, and with --before-tree another one (before a change) beside it, request by request. */
const trees: readonly { readonly suffix: string; readonly tree?: string }[] = [
  { suffix: '' },
  ...(beforeTree ? [{ suffix: ` (before: ${execFileSync('git', ['-C', beforeTree, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()})`, tree: beforeTree }] : []),
];

const rows = await measureLoad();
const profiled = await measureProfile();
const section = buildMcpSection({ plan, layout: cores.description, smoke, rows, profiled, compared: beforeTree !== undefined });
mkdirSync(dirname(outFile), { recursive: true });
writeFileSync(outFile, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${section.title}: written to ${outFile}\n`);

/** One host per tree, each with the requests recorded from it. */
interface TreeHost {
  readonly suffix: string;
  readonly host: McpHost;
  readonly calls: Awaited<ReturnType<typeof recordToolCalls>>;
  readonly lists: Awaited<ReturnType<typeof recordToolLists>>;
}

async function startHosts(nodeFlags: (index: number) => readonly string[]): Promise<TreeHost[]> {
  const started: TreeHost[] = [];
  const running: McpHost[] = [];
  try {
    for (const [index, { suffix, tree }] of trees.entries()) {
      const host = await startMcpHost(cores.contenderCore, { nodeFlags: nodeFlags(index), tree });
      running.push(host);
      started.push({ suffix, host, calls: await recordToolCalls(host), lists: await recordToolLists(host) });
    }
    return started;
  } catch (error) {
    // Every host started is stopped, its data folder removed, whichever step failed.
    await Promise.all(running.map((host) => host.close()));
    throw error;
  }
}

async function measureLoad(): Promise<LoadRow[]> {
  const hosts = await startHosts(() => []);
  try {
    const floors = floorRequests(hosts[0].host);
    const measured: LoadRow[] = [];
    for (const concurrency of plan.concurrencies) {
      for (const { tool } of MEASURED_TOOLS) {
        const floor = floors[tool];
        if (floor) measured.push({ request: tool, route: '/fhir/R4 (floor)', concurrency, result: await load(floor, concurrency, plan.durationSeconds) });
        for (const era of PROTOCOL_ERAS) {
          for (const { suffix, calls } of hosts) {
            measured.push({ request: tool, route: `/mcp ${era}${suffix}`, concurrency, result: await load(calls[era][tool], concurrency, plan.durationSeconds) });
          }
        }
      }
      for (const era of PROTOCOL_ERAS) {
        for (const { suffix, lists } of hosts) {
          measured.push({ request: 'tools/list (no tool)', route: `/mcp ${era}${suffix}`, concurrency, result: await load(lists[era], concurrency, plan.durationSeconds) });
        }
      }
    }
    return measured;
  } finally {
    await Promise.all(hosts.map((entry) => entry.host.close()));
  }
}

/** The floor's read, `tools/list` and `read_record` on profiled hosts, one after the other, each its window. */
async function measureProfile(): Promise<ProfiledCall[]> {
  const profileDirectories = trees.map((_, index) => join(dirname(outFile), `mcp-profile-${index}`));
  for (const directory of profileDirectories) {
    // A fresh folder: the one main-thread profile in it is this run's host's.
    rmSync(directory, { recursive: true, force: true });
    mkdirSync(directory, { recursive: true });
  }
  const hosts = await startHosts((index) => ['--cpu-prof', `--cpu-prof-dir=${profileDirectories[index]}`]);
  const phases: { readonly host: number; readonly label: string; readonly fromMicros: number; readonly toMicros: number; readonly result: McpLoadResult }[] = [];
  const run = async (host: number, label: string, request: PreparedRequest): Promise<void> => {
    const fromMicros = monotonicMicros();
    const result = await load(request, 4, plan.profileSeconds, 0);
    phases.push({ host, label, fromMicros, toMicros: monotonicMicros(), result });
  };
  const pids = hosts.map((entry) => entry.host.process.pid);
  try {
    await run(0, 'GET /fhir/R4/Observation/<id> (floor)', floorRequests(hosts[0].host).read_record as PreparedRequest);
    for (const [label, requestOf] of [
      ['tools/list, /mcp 2026-07-28', (entry: TreeHost) => entry.lists['2026-07-28']],
      ['read_record, /mcp 2026-07-28', (entry: TreeHost) => entry.calls['2026-07-28'].read_record],
      ['read_record, /mcp 2025-11-25', (entry: TreeHost) => entry.calls['2025-11-25'].read_record],
    ] as const) {
      for (const [index, entry] of hosts.entries()) await run(index, `${label}${entry.suffix}`, requestOf(entry));
    }
  } finally {
    await Promise.all(hosts.map((entry) => entry.host.close()));
  }
  const splits = new Map<(typeof phases)[number], WindowSplit>();
  for (const [index, directory] of profileDirectories.entries()) {
    // The main thread's profile: CPU.<date>.<time>.<pid>.0.<sequence>.cpuprofile (workers have other thread ids).
    const profile = readdirSync(directory).find((file) => file.includes(`.${pids[index]}.0.`) && file.endsWith('.cpuprofile'));
    if (!profile) throw new Error(`the profiled host wrote no profile into ${directory}`);
    const own = phases.filter((phase) => phase.host === index);
    splitProfile(join(directory, profile), own).forEach((split, position) => splits.set(own[position], split));
  }
  return phases.map((phase) => ({ label: phase.label, calls: phase.result.completed, errors: phase.result.errors, split: splits.get(phase) as WindowSplit }));
}

/** CLOCK_MONOTONIC in µs, the clock of V8's profile timestamps on Linux. */
function monotonicMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** One measurement by a fresh load process on the load core. */
async function load(request: PreparedRequest, concurrency: number, durationSeconds: number, warmupSeconds = plan.warmupSeconds): Promise<McpLoadResult> {
  const job: McpLoadJob = { request, concurrency, warmupSeconds, durationSeconds };
  const child = startNodeProcess(['bench/mcp/mcp-load.ts'], { core: cores.generatorCore, stdio: ['pipe', 'pipe', 'pipe'] });
  const { stdin, stdout, stderr } = child;
  if (!stdin || !stdout || !stderr) throw new Error("the load generator's stdio is not piped");
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', resolveExit));
  stdin.end(JSON.stringify(job));
  const [output, errors, code] = await Promise.all([text(stdout), text(stderr), exited]);
  if (code !== 0) throw new Error(`load generator failed (${code}): ${errors.slice(-2000)}`);
  return JSON.parse(output) as McpLoadResult;
}
