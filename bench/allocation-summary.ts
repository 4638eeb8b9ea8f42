/**
 * Where a sampling heap profile's bytes were allocated (bench/profile/allocations-on-signal.ts), per unit: each
 * sample goes to the innermost frame of its stack that is not Node's own code, by function or (`--by-file`) by
 * package or project file. `--per N` divides by the turns of the window (scenario 14's "turns profiled").
 *
 *   node bench/allocation-summary.ts <file.heapprofile> [--per 80] [--by-file] [--top 40]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface HeapNode {
  readonly callFrame: CallFrame;
  readonly selfSize: number;
  readonly children?: readonly HeapNode[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { per: { type: 'string', default: '1' }, 'by-file': { type: 'boolean', default: false }, top: { type: 'string', default: '40' } },
});
if (positionals.length !== 1) {
  throw new Error('usage: node bench/allocation-summary.ts <file.heapprofile> [--per N] [--by-file] [--top 40]');
}
const per = Number(values.per);
const profile = JSON.parse(readFileSync(positionals[0], 'utf8')) as { head: HeapNode };

const shortUrl = (url: string): string => url.replace(/^.*\/node_modules\//, '').replace(/^file:\/\/.*?\/(plugin|bench|test)\//, '$1/');
const label = (frame: CallFrame): string => `${frame.functionName || '(anonymous)'}  ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
const owner = (frame: CallFrame): string => {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(frame.url);
  return pkg ? pkg[1] : frame.url ? shortUrl(frame.url) : `(${frame.functionName || 'native'})`;
};
const isNodeOwn = (frame: CallFrame): boolean => frame.url === '' || frame.url.startsWith('node:');

const bytes = new Map<string, number>();
let total = 0;
const walk = (node: HeapNode, outer: CallFrame | undefined): void => {
  const frame = isNodeOwn(node.callFrame) && outer ? outer : node.callFrame;
  if (node.selfSize > 0) {
    const key = values['by-file'] ? owner(frame) : label(frame);
    bytes.set(key, (bytes.get(key) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  for (const child of node.children ?? []) {
    walk(child, frame);
  }
};
walk(profile.head, undefined);

console.log(`allocated: ${(total / per / 1024).toFixed(1)} KB per unit (${per} units)`);
for (const [key, size] of [...bytes].sort((left, right) => right[1] - left[1]).slice(0, Number(values.top))) {
  console.log(`${(size / per / 1024).toFixed(1).padStart(9)} KB  ${((100 * size) / total).toFixed(1).padStart(5)} %  ${key}`);
}
