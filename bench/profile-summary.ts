/**
 * Top functions of a V8 .cpuprofile (from `npm run bench -- --profile`), over a window of the profile, so the host's
 * start-up and the other contenders' turns do not drown the request path. Self time by default; `--inclusive`
 * counts a function's callees too (each sample once per function, however deep the recursion), which is what a
 * pipeline step costs; `--match TEXT` keeps only functions whose name or file contains TEXT; `--by-file` adds self
 * time up by package (`openai`, `@medplum/core`) or project file instead, idle left out.
 *
 * The window: `--last-seconds N`, or `--from S --to S` (seconds since the profile started). `--timeline` prints the
 * busy milliseconds of each half second, to find where a scenario ran. `--per N` prints each figure as µs per unit,
 * N being the units in the window (the turns a scenario completed there, say), so two profiles of one run (fhirgate
 * and the floor, bench/results/raw/profiles/ and profiles/floor/) compare turn for turn.
 *
 *   node bench/profile-summary.ts <file.cpuprofile> [--last-seconds 10 | --from 51.5 --to 57.5] [--top 30]
 *        [--inclusive] [--match chat/] [--by-file] [--per 1237] [--timeline]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'last-seconds': { type: 'string' },
    from: { type: 'string' },
    to: { type: 'string' },
    top: { type: 'string', default: '30' },
    inclusive: { type: 'boolean', default: false },
    match: { type: 'string' },
    'by-file': { type: 'boolean', default: false },
    per: { type: 'string' },
    timeline: { type: 'boolean', default: false },
  },
});
const file = positionals[0];
if (!file) {
  throw new Error(
    'usage: node bench/profile-summary.ts <file.cpuprofile> [--last-seconds N | --from S --to S] [--top N] [--inclusive] [--match TEXT] [--by-file] [--per N] [--timeline]'
  );
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const nodesById = new Map(profile.nodes.map((node) => [node.id, node]));
const parentOf = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
const windowStart = values['last-seconds']
  ? profile.endTime - Number(values['last-seconds']) * 1e6
  : profile.startTime + Number(values.from ?? 0) * 1e6;
const windowEnd = values.to === undefined ? profile.endTime : profile.startTime + Number(values.to) * 1e6;
const IDLE = '(idle)';

function keyOf(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/(plugin|bench|test)\//, '$1/');
  return `${functionName || '(anonymous)'}  ${where}:${lineNumber + 1}`;
}

/** A package (`openai`, `@medplum/core`), a project file, a Node module, or V8's own entries ((garbage collector)). */
function fileOf(node: ProfileNode): string {
  const { functionName, url } = node.callFrame;
  if (!url) return functionName;
  const inModules = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (inModules?.[1]) return inModules[1];
  return url.replace(/^file:\/\/.*?\/(plugin|bench|test)\//, '$1/');
}

/** The keys a sample counts for: its own frame (or file), or with --inclusive every frame on its stack, once each. */
function keysOf(nodeId: number): Iterable<string> {
  const node = nodesById.get(nodeId);
  if (!node) return [];
  if (values['by-file']) return node.callFrame.functionName === IDLE ? [] : [fileOf(node)];
  if (!values.inclusive) return [keyOf(node)];
  const keys = new Set<string>();
  for (let id: number | undefined = nodeId; id !== undefined; id = parentOf.get(id)) {
    const frame = nodesById.get(id);
    if (frame) keys.add(keyOf(frame));
  }
  return keys;
}

const microsecondsByKey = new Map<string, number>();
const busyByHalfSecond = new Map<number, number>();
let total = 0;
let busy = 0;
let time = profile.startTime;
profile.samples.forEach((nodeId, index) => {
  time += profile.timeDeltas[index] ?? 0;
  if (time < windowStart || time >= windowEnd) return;
  const delta = profile.timeDeltas[index + 1] ?? 0;
  for (const key of keysOf(nodeId)) microsecondsByKey.set(key, (microsecondsByKey.get(key) ?? 0) + delta);
  total += delta;
  if (nodesById.get(nodeId)?.callFrame.functionName !== IDLE) {
    busy += delta;
    const halfSecond = Math.floor((time - profile.startTime) / 5e5) / 2;
    busyByHalfSecond.set(halfSecond, (busyByHalfSecond.get(halfSecond) ?? 0) + delta);
  }
});

if (values.timeline) {
  console.log(`busy ms per half second (seconds since the profile started), ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s in all:`);
  console.log([...busyByHalfSecond].map(([second, microseconds]) => `${second}:${Math.round(microseconds / 1000)}`).join(' '));
  process.exit(0);
}

const per = values.per === undefined ? undefined : Number(values.per);
const top = [...microsecondsByKey.entries()]
  .filter(([key]) => values.match === undefined || key.includes(values.match))
  .sort((left, right) => right[1] - left[1])
  .slice(0, Number(values.top));
const kind = values['by-file'] ? 'self time by package or file, idle left out' : values.inclusive ? 'inclusive time' : 'self time';
console.log(`window: ${(total / 1e6).toFixed(2)} s sampled, ${(busy / 1e6).toFixed(2)} s busy; ${kind}${per ? `; µs per unit (${per} units): busy ${(busy / per).toFixed(0)}` : ''}`);
const share = values['by-file'] ? busy : total;
for (const [key, microseconds] of top) {
  const amount = per ? `${(microseconds / per).toFixed(1).padStart(8)} µs` : `${(microseconds / 1000).toFixed(0).padStart(7)} ms`;
  console.log(`${((microseconds / share) * 100).toFixed(1).padStart(5)} %  ${amount}  ${key}`);
}
