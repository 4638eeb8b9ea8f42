import { costByPart, UNATTRIBUTED, type CpuProfile, type CpuProfileNode } from './cost-by-part.ts';

/** A profile from stacks (outermost first) and, for each sample, the stack it fell in and its µs. */
function profileOf(stacks: Record<string, readonly [string, string][]>, samples: readonly [string, number][]): CpuProfile {
  const nodes: { id: number; callFrame: { functionName: string; url: string }; children: number[] }[] = [{ id: 1, callFrame: { functionName: '(root)', url: '' }, children: [] }];
  const leafOf = new Map<string, number>();
  for (const [name, frames] of Object.entries(stacks)) {
    let parent = nodes[0];
    for (const [functionName, url] of frames) {
      const node = { id: nodes.length + 1, callFrame: { functionName, url }, children: [] };
      nodes.push(node);
      parent?.children.push(node.id);
      parent = node;
    }
    leafOf.set(name, parent?.id ?? 1);
  }
  // timeDeltas[i + 1] is sample i's time; the first delta is the start.
  return { nodes: nodes as CpuProfileNode[], samples: samples.map(([name]) => leafOf.get(name) ?? 1), timeDeltas: [0, ...samples.map(([, micros]) => micros)] };
}

const CORE = 'file:///x/node_modules/@medplum/core/dist/esm/index.mjs';
const REPOSITORY = 'file:///x/plugin/hosts/standalone/store/sqlite-repository.ts';

describe('costByPart', () => {
  test('a sample belongs to the innermost frame a part claims: Medplum under validation, under the index, elsewhere', () => {
    const profile = profileOf(
      {
        validating: [['createResource', REPOSITORY], ['validate', CORE], ['crawl', CORE], ['Ra', CORE]],
        indexing: [['createResource', REPOSITORY], ['rowsFor', 'file:///x/plugin/hosts/standalone/store/search-index.ts'], ['eval', CORE]],
        policy: [['read', 'file:///x/plugin/hosts/standalone/compiled-access-policy.ts'], ['eval', CORE]],
        medplumElse: [['handler', 'node:internal/timers'], ['eval', CORE]],
        compressing: [['insertVersion', 'file:///x/plugin/hosts/standalone/store/resource-store.ts'], ['encodeContent', 'file:///x/plugin/hosts/standalone/store/content-codec.ts'], ['processChunkSync', 'node:zlib']],
        gc: [['(garbage collector)', '']],
        idle: [['(idle)', '']],
        timers: [['processTimers', 'node:internal/timers']],
      },
      [
        ['validating', 300],
        ['indexing', 100],
        ['policy', 50],
        ['medplumElse', 20],
        ['compressing', 40],
        ['gc', 60],
        ['idle', 10_000],
        ['timers', 30],
      ],
    );
    const { perTurn, busyPerTurn } = costByPart(profile, 2);
    expect(perTurn.get("Medplum's validation of each record")).toBe(150);
    expect(perTurn.get('store: search-index rows (FHIRPath values, rows)')).toBe(50);
    expect(perTurn.get('sign-in and the AccessPolicy')).toBe(25);
    expect(perTurn.get('Medplum (other)')).toBe(10);
    expect(perTurn.get('store: JSON compression and decoding')).toBe(20);
    expect(perTurn.get('garbage collection')).toBe(30);
    expect(perTurn.get(UNATTRIBUTED)).toBe(15);
    // Idle time is no turn's cost; the parts add up to the busy total.
    expect(busyPerTurn).toBe(300);
    expect([...perTurn.values()].reduce((sum, value) => sum + value, 0)).toBe(300);
  });

  test('the provider call, the journal and the HTTP server are told apart', () => {
    const profile = profileOf(
      {
        sdk: [['onRequest', 'node:_http_server'], ['create', 'file:///x/node_modules/openai/client.mjs'], ['fetch', 'node:internal/deps/undici/undici']],
        journal: [['onRequest', 'node:_http_server'], ['append', 'file:///x/plugin/chat/reply-journal.ts'], ['writeSync', 'node:fs']],
        server: [['onRequest', 'node:_http_server'], ['write', 'node:internal/streams/writable']],
      },
      [
        ['sdk', 10],
        ['journal', 20],
        ['server', 30],
      ],
    );
    const { perTurn } = costByPart(profile, 1);
    expect(perTurn.get('provider call (openai SDK, undici)')).toBe(10);
    expect(perTurn.get('reply journal')).toBe(20);
    expect(perTurn.get('HTTP server (node:http, express, router)')).toBe(30);
  });

  test('a profile without its number of turns is refused', () => {
    expect(() => costByPart(profileOf({}, []), 0)).toThrow('number of turns');
  });
});
