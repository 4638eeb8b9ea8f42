/**
 * The faults of a chaos run: what each request meets, drawn from a seeded generator so a run can be repeated
 * exactly. Provider faults are played by the LLM emulator (queued behaviours); client faults by the client.
 */
import type { EmulatorBehaviour } from '../test/emulator/index.ts';

/** What one request meets. */
export type FaultKind =
  | 'none'
  | 'provider-500'
  | 'provider-503'
  | 'provider-429'
  | 'provider-hang'
  | 'provider-slow-first-token'
  | 'provider-malformed'
  | 'provider-stream-error'
  | 'provider-cut'
  | 'client-leaves-mid-stream'
  | 'client-leaves-during-stall'
  | 'client-leaves-early';

/** The relative weight of each kind in a run. */
const WEIGHTS: Readonly<Record<FaultKind, number>> = {
  none: 40,
  'provider-500': 6,
  'provider-503': 6,
  'provider-429': 5,
  'provider-hang': 3,
  'provider-slow-first-token': 3,
  'provider-malformed': 4,
  'provider-stream-error': 6,
  'provider-cut': 6,
  'client-leaves-mid-stream': 12,
  'client-leaves-during-stall': 2,
  'client-leaves-early': 9,
};

/** The emulator's behaviour for a request meeting `kind` (undefined: the default, a normal reply). */
export function providerBehaviour(kind: FaultKind): EmulatorBehaviour | undefined {
  switch (kind) {
    case 'provider-500':
      return { errorStatus: 500 };
    case 'provider-503':
      return { errorStatus: 503 };
    case 'provider-429':
      return { errorStatus: 429, retryAfterSeconds: 0 };
    case 'provider-hang':
      return { hang: true };
    case 'provider-slow-first-token':
      return { latencyMs: 3_000 };
    case 'provider-malformed':
      return { malformed: true };
    case 'provider-stream-error':
      return { replyTokens: 30, streamErrorAfterTokens: 5 };
    case 'provider-cut':
      return { replyTokens: 30, cutAfterTokens: 5 };
    case 'client-leaves-mid-stream':
      return { replyTokens: 60, tokensPerSecond: 200 };
    case 'client-leaves-during-stall':
      // The rest of the reply arrives while the host is stalled, together with the client's departure.
      return { replyTokens: 60, tokensPerSecond: 400 };
    default:
      return undefined;
  }
}

/** mulberry32: a small, fast, seeded generator of numbers in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Draws a fault kind. */
export function drawFault(random: () => number): FaultKind {
  const total = Object.values(WEIGHTS).reduce((sum, weight) => sum + weight, 0);
  let point = random() * total;
  for (const [kind, weight] of Object.entries(WEIGHTS) as [FaultKind, number][]) {
    point -= weight;
    if (point < 0) {
      return kind;
    }
  }
  return 'none';
}
