import { runInNewContext } from 'node:vm';
import { compactHeap } from './compact-heap.ts';

const MiB = 1024 * 1024;

/** Makes what loading the definitions makes: many small objects, garbage once the caller lets go of them. */
function makeObjects(): unknown[] {
  return Array.from({ length: 400_000 }, (_, index) => ({ index, text: `element ${index}`, children: [index] }));
}

describe('compactHeap', () => {
  it('gives back the heap that garbage made V8 commit', () => {
    // Held while the heap is measured, so it is certainly on the committed heap, whatever V8 collected before.
    let objects: unknown[] | undefined = makeObjects();
    const committedWhileHeld = process.memoryUsage().heapTotal;
    expect(objects).toHaveLength(400_000);
    objects = undefined;

    const { committedBeforeBytes, committedAfterBytes } = compactHeap();

    expect(committedBeforeBytes).toBeGreaterThanOrEqual(committedWhileHeld - 16 * MiB);
    // The objects alone take some 40 MB; at least half of that goes back.
    expect(committedAfterBytes).toBeLessThan(committedBeforeBytes - 20 * MiB);
    // What it reports is the heap as it stands (V8's background threads may still move a page or two).
    expect(Math.abs(committedAfterBytes - process.memoryUsage().heapTotal)).toBeLessThan(4 * MiB);
  });

  it('leaves no gc function behind, in this context or in new ones', () => {
    const exposedBefore = 'gc' in globalThis;
    compactHeap();
    expect('gc' in globalThis).toBe(exposedBefore);
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});
