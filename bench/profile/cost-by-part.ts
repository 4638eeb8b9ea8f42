/**
 * What a turn's CPU is spent on, part by part, from a V8 CPU profile of the turns alone (profile-on-signal.ts).
 *
 * Each sample is given to one part: walking its stack from the running function outwards, the first frame that a
 * part's rule claims decides (Medplum's code in general only when nothing around it is claimed). So Medplum's FHIRPath evaluated for a search-index row counts for the index rows,
 * the same FHIRPath under the AccessPolicy for the policy, and zlib under the store's codec for the codec. A sample
 * no frame of which is claimed (Node's timers, microtask queue, the event loop) is "Node and V8, unattributed".
 * Idle samples are not counted. Figures are µs of CPU per turn: the samples' time over the turns they served.
 */

export interface CpuProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

export interface CpuProfile {
  readonly nodes: readonly CpuProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

interface Frame {
  readonly functionName: string;
  readonly url: string;
}

interface PartRule {
  readonly part: string;
  readonly claims: (frame: Frame) => boolean;
  /** Claims a sample only when no other rule claims any frame of it (Medplum's code called from anywhere). */
  readonly fallback?: true;
}

const inFile = (...paths: string[]) => (frame: Frame) => paths.some((path) => frame.url.includes(path));

/**
 * The parts, in the order the report lists them. A rule claims frames; the innermost claimed frame of a sample
 * decides its part, so rules do not need an order among themselves except where one frame matches two (first wins).
 */
const RULES: readonly PartRule[] = [
  { part: 'garbage collection', claims: (frame) => frame.functionName === '(garbage collector)' },
  {
    part: "Medplum's validation of each record",
    claims: (frame) => frame.url.includes('@medplum/core') && (frame.functionName === 'validate' || frame.functionName === 'validateResource'),
  },
  { part: 'store: search-index rows (FHIRPath values, rows)', claims: inFile('/store/search-index.ts') },
  { part: 'store: JSON compression and decoding', claims: inFile('/store/content-codec.ts', '/store/content-cache.ts', '/store/content-dictionary.ts') },
  {
    part: 'store: SQLite statements and the durable commit',
    claims: inFile('/store/resource-store.ts', '/store/group-commit.ts', '/store/wal-sync.ts', '/store/wal-checkpointer.ts', '/store/store-file-identity.ts', 'node:sqlite'),
  },
  {
    part: 'store: search plan and the history page',
    claims: inFile('/store/search-executor.ts', '/store/search-plan.ts', '/store/filter-translation.ts', '/store/candidate-sources.ts', '/store/sort.ts', '/store/search-estimate.ts'),
  },
  { part: 'store: the repository (ids, versions, meta)', claims: inFile('/store/sqlite-repository.ts', '/store/async-mutex.ts', '/standalone/project-repository.ts') },
  {
    part: 'sign-in and the AccessPolicy',
    claims: inFile('/standalone/compiled-access-policy.ts', '/standalone/auth/', '/chat/authenticate-caller.ts', '/http/bearer-token.ts'),
  },
  { part: 'reply journal', claims: inFile('/chat/reply-journal', '/chat/journal-lease.ts') },
  { part: 'telemetry and logs', claims: inFile('/plugin/telemetry/', '/standalone/logger.ts', '/node_modules/pino', '@opentelemetry', '/standalone/prometheus-metrics.ts') },
  { part: 'governance (model access, budgets, patient data)', claims: inFile('/plugin/governance/') },
  { part: 'provider call (openai SDK, undici)', claims: inFile('/node_modules/openai/', 'node:internal/deps/undici', '/node_modules/undici/', '/plugin/llm/') },
  { part: "fhirgate's chat pipeline (parse, steps, records, answer)", claims: inFile('/plugin/chat/', '/plugin/http/', '/plugin/responses/', '/plugin/create-plugin.ts') },
  { part: 'the relay itself (bench code)', claims: inFile('/bench/contenders/') },
  {
    part: 'HTTP server (node:http, express, router)',
    claims: inFile('node:_http_server', 'node:_http_common', 'node:_http_outgoing', 'node:_http_incoming', '/node_modules/express/', '/node_modules/router/', '/node_modules/body-parser/', '/node_modules/raw-body/', '/standalone/serve.ts', '/standalone/fhir-routes.ts'),
  },
  { part: 'Medplum (other)', claims: inFile('/node_modules/@medplum/'), fallback: true },
];

export const UNATTRIBUTED = 'Node and V8, unattributed';
const IDLE = '(idle)';

/** Every part a report may list, in order (the unattributed rest last). */
export const PARTS: readonly string[] = [...RULES.map((rule) => rule.part), UNATTRIBUTED];

/** µs of CPU per turn by part (every part of PARTS, zero where no sample fell), and the busy total. */
export function costByPart(profile: CpuProfile, turns: number): { readonly perTurn: ReadonlyMap<string, number>; readonly busyPerTurn: number } {
  if (!(turns > 0)) throw new Error('costByPart needs the number of turns the profile covers');
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const specific = RULES.filter((rule) => !rule.fallback);
  const fallbacks = RULES.filter((rule) => rule.fallback);
  const innermost = (rules: readonly PartRule[]) => {
    const memo = new Map<number, string | undefined>();
    const find = (id: number): string | undefined => {
      if (memo.has(id)) return memo.get(id);
      const node = nodes.get(id);
      const parent = parentOf.get(id);
      const part = node && (rules.find((rule) => rule.claims(node.callFrame))?.part ?? (parent === undefined ? undefined : find(parent)));
      memo.set(id, part);
      return part;
    };
    return find;
  };
  const specificPart = innermost(specific);
  const fallbackPart = innermost(fallbacks);
  const partOf = (id: number) => (nodes.get(id)?.callFrame.functionName === IDLE ? IDLE : (specificPart(id) ?? fallbackPart(id)));
  const totals = new Map<string, number>(PARTS.map((part) => [part, 0]));
  let busy = 0;
  profile.samples.forEach((id, index) => {
    // A sample stands for the time until the next one (V8's deltas are the time before each sample).
    const micros = profile.timeDeltas[index + 1] ?? 0;
    const part = partOf(id) ?? UNATTRIBUTED;
    if (part === IDLE) return;
    totals.set(part, (totals.get(part) ?? 0) + micros);
    busy += micros;
  });
  return { perTurn: new Map([...totals].map(([part, micros]) => [part, micros / turns])), busyPerTurn: busy / turns };
}
