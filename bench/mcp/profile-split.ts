/**
 * Where the host's CPU time goes during a window of its V8 profile (`node --cpu-prof`): each sample is given to the
 * first step, in the order of {@link STEPS}, that has a frame on the sample's stack, and the rest to "other". The
 * windows are the bench's own clock readings (`process.hrtime`): on Linux V8's profile timestamps and Node's
 * hrtime both read CLOCK_MONOTONIC, so a phase the bench timed is the same stretch of the profile.
 *
 * A stack holds the calls of the moment: work resumed after an `await` (a store write's commit, say) shows under the
 * function it resumed in, not under the step that awaited it, so a step's row is its synchronous CPU, and store work
 * resumed on its own lands in "store, HTTP and the rest".
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** A step of a request, recognised by a frame on the stack. */
interface Step {
  readonly label: string;
  readonly matches: (frame: ProfileNode['callFrame']) => boolean;
}

const named = (...names: string[]) => (frame: ProfileNode['callFrame']): boolean => names.includes(frame.functionName);
const inFile = (...parts: string[]) => (frame: ProfileNode['callFrame']): boolean => parts.some((part) => frame.url.includes(part));

/** The steps, most specific first: a sample under the disclosure's write inside a tool is the write's. */
export const STEPS: readonly Step[] = [
  { label: 'authentication (token, membership, project)', matches: (frame) => named('authenticateCaller')(frame) || inFile('authenticate-caller.ts')(frame) },
  { label: 'fresh MCP server + handler construction (tools registered, schemas built)', matches: named('registerMcpTools', 'createMcpHandler', 'McpServer', 'fromJsonSchema') },
  { label: 'disclosure AuditEvent (built and written)', matches: named('disclose', 'buildDisclosureEvent', 'recordDisclosure', 'requireStored') },
  { label: "the tool's read (patient checked, records read)", matches: named('runChartTool', 'runFindPatients', 'summarise', 'patientSummary', 'runFhirTool', 'findPatients', 'resolve', 'formOf') },
  { label: 'SDK: message validation, dispatch, answer', matches: inFile('@modelcontextprotocol', '/zod/', '/ajv/') },
  { label: 'Express request → web Request, answer written back', matches: named('toWebRequest', 'sendWebResponse', 'readJsonBody') },
  { label: 'FHIR route (Medplum router, /fhir/R4)', matches: inFile('fhir-routes.ts', '@medplum/fhir-router') },
  { label: 'garbage collection', matches: (frame) => frame.functionName === '(garbage collector)' },
];
export const OTHER = 'store (SQLite), HTTP and the rest';

/** Busy CPU milliseconds of a window, in total and per step (labels of {@link STEPS}, then {@link OTHER}). */
export interface WindowSplit {
  readonly busyMs: number;
  readonly steps: Readonly<Record<string, number>>;
}

/** Reads a profile and splits the windows `[fromMicros, toMicros)` (CLOCK_MONOTONIC µs). */
export function splitProfile(file: string, windows: readonly { readonly fromMicros: number; readonly toMicros: number }[]): WindowSplit[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const nodesById = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const stepOfNode = new Map<number, string | undefined>();
  const stepOf = (nodeId: number): string | undefined => {
    if (stepOfNode.has(nodeId)) return stepOfNode.get(nodeId);
    const frames: ProfileNode['callFrame'][] = [];
    for (let id: number | undefined = nodeId; id !== undefined; id = parentOf.get(id)) frames.push((nodesById.get(id) as ProfileNode).callFrame);
    const label = STEPS.find((step) => frames.some(step.matches))?.label;
    stepOfNode.set(nodeId, label);
    return label;
  };
  const splits = windows.map(() => ({ busyMicros: 0, steps: new Map<string, number>() }));
  let time = profile.startTime;
  for (let index = 0; index < profile.samples.length; index += 1) {
    time += profile.timeDeltas[index];
    // A sample's delta is the time since the previous one: the time it stands for.
    const micros = profile.timeDeltas[index + 1] ?? 0;
    const node = nodesById.get(profile.samples[index]) as ProfileNode;
    if (node.callFrame.functionName === '(idle)') continue;
    const window = windows.findIndex((candidate) => time >= candidate.fromMicros && time < candidate.toMicros);
    if (window === -1) continue;
    const split = splits[window];
    const label = stepOf(node.id) ?? OTHER;
    split.busyMicros += micros;
    split.steps.set(label, (split.steps.get(label) ?? 0) + micros);
  }
  return splits.map((split) => ({ busyMs: split.busyMicros / 1000, steps: Object.fromEntries([...split.steps].map(([label, micros]) => [label, micros / 1000])) }));
}
