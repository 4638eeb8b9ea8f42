/**
 * Top functions of a V8 .cpuprofile (from `npm run bench -- --profile`), optionally only over the last N seconds of
 * the profile, so the host's start-up does not drown the request path. Self time by default; `--inclusive` counts
 * a function's callees too (each sample once per function, however deep the recursion), which is what a pipeline
 * step costs; `--match TEXT` keeps only functions whose name or file contains TEXT.
 *
 *   node bench/profile-summary.ts <file.cpuprofile> [--last-seconds 10] [--top 30] [--inclusive] [--match chat/]
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
    top: { type: 'string', default: '30' },
    inclusive: { type: 'boolean', default: false },
    match: { type: 'string' },
  },
});
const file = positionals[0];
if (!file) throw new Error('usage: node bench/profile-summary.ts <file.cpuprofile> [--last-seconds N] [--top N] [--inclusive] [--match TEXT]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const nodesById = new Map(profile.nodes.map((node) => [node.id, node]));
const parentOf = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
const windowStart = values['last-seconds'] ? profile.endTime - Number(values['last-seconds']) * 1e6 : profile.startTime;

function keyOf(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/(plugin|bench|test)\//, '$1/');
  return `${functionName || '(anonymous)'}  ${where}:${lineNumber + 1}`;
}

/** The keys a sample counts for: its own frame, or with --inclusive every frame on its stack, once each. */
function keysOf(nodeId: number): Iterable<string> {
  const node = nodesById.get(nodeId);
  if (!node) return [];
  if (!values.inclusive) return [keyOf(node)];
  const keys = new Set<string>();
  for (let id: number | undefined = nodeId; id !== undefined; id = parentOf.get(id)) {
    const frame = nodesById.get(id);
    if (frame) keys.add(keyOf(frame));
  }
  return keys;
}

const microsecondsByKey = new Map<string, number>();
let total = 0;
let time = profile.startTime;
profile.samples.forEach((nodeId, index) => {
  time += profile.timeDeltas[index] ?? 0;
  if (time < windowStart) return;
  const delta = profile.timeDeltas[index + 1] ?? 0;
  for (const key of keysOf(nodeId)) microsecondsByKey.set(key, (microsecondsByKey.get(key) ?? 0) + delta);
  total += delta;
});

const top = [...microsecondsByKey.entries()]
  .filter(([key]) => values.match === undefined || key.includes(values.match))
  .sort((left, right) => right[1] - left[1])
  .slice(0, Number(values.top));
console.log(`window: ${(total / 1e6).toFixed(2)} s sampled${values.inclusive ? ', inclusive time' : ', self time'}`);
for (const [key, microseconds] of top) {
  console.log(`${((microseconds / total) * 100).toFixed(1).padStart(5)} %  ${(microseconds / 1000).toFixed(0).padStart(7)} ms  ${key}`);
}
