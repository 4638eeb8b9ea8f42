/**
 * Top self-time functions of a V8 .cpuprofile (from `npm run bench -- --profile`), optionally only over the last
 * N seconds of the profile, so the host's start-up does not drown the request path.
 *
 *   node bench/profile-summary.ts <file.cpuprofile> [--last-seconds 10] [--top 30]
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

const { values, positionals } = parseArgs({ allowPositionals: true, options: { 'last-seconds': { type: 'string' }, top: { type: 'string', default: '30' } } });
const file = positionals[0];
if (!file) throw new Error('usage: node bench/profile-summary.ts <file.cpuprofile> [--last-seconds N] [--top N]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const nodesById = new Map(profile.nodes.map((node) => [node.id, node]));
const windowStart = values['last-seconds'] ? profile.endTime - Number(values['last-seconds']) * 1e6 : profile.startTime;

const selfMicroseconds = new Map<string, number>();
let total = 0;
let time = profile.startTime;
profile.samples.forEach((nodeId, index) => {
  time += profile.timeDeltas[index] ?? 0;
  if (time < windowStart) return;
  const delta = profile.timeDeltas[index + 1] ?? 0;
  const node = nodesById.get(nodeId);
  if (!node) return;
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/(plugin|bench|test)\//, '$1/');
  const key = `${functionName || '(anonymous)'}  ${where}:${lineNumber + 1}`;
  selfMicroseconds.set(key, (selfMicroseconds.get(key) ?? 0) + delta);
  total += delta;
});

const top = [...selfMicroseconds.entries()].sort((left, right) => right[1] - left[1]).slice(0, Number(values.top));
console.log(`window: ${(total / 1e6).toFixed(2)} s sampled`);
for (const [key, microseconds] of top) {
  console.log(`${((microseconds / total) * 100).toFixed(1).padStart(5)} %  ${(microseconds / 1000).toFixed(0).padStart(7)} ms  ${key}`);
}
