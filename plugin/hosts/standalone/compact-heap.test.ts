import { runInNewContext } from 'node:vm';
import { compactHeap } from './compact-heap.ts';

/** Makes garbage the way loading the definitions does: many small objects, unreachable once the function returns. */
function makeGarbage(): number {
  const objects = Array.from({ length: 400_000 }, (_, index) => ({ index, text: `element ${index}`, children: [index] }));
  return objects.length;
}

describe('compactHeap', () => {
  it('gives back the heap that garbage made V8 commit', () => {
    expect(makeGarbage()).toBe(400_000);
    const { committedBeforeBytes, committedAfterBytes } = compactHeap();
    expect(committedAfterBytes).toBeLessThan(committedBeforeBytes);
    expect(committedAfterBytes).toBe(process.memoryUsage().heapTotal);
  });

  it('leaves no gc function behind, in this context or in new ones', () => {
    const exposedBefore = 'gc' in globalThis;
    compactHeap();
    expect('gc' in globalThis).toBe(exposedBefore);
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
