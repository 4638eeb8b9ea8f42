/** A contender: something that answers `POST /v1/chat/completions` in front of the shared emulator. */

export type ContenderName = 'direct' | 'undici proxy' | 'SDK relay' | 'SDK relay + store' | 'Portkey' | 'fhirgate';

/** The contenders in report order: the floors first, fhirgate last. */
export const CONTENDER_NAMES: readonly ContenderName[] = ['direct', 'undici proxy', 'SDK relay', 'SDK relay + store', 'Portkey', 'fhirgate'];

export interface Contender {
  readonly name: ContenderName;
  readonly chatUrl: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The process whose CPU and memory are measured; undefined for `direct` (that process is the emulator). */
  readonly pid?: number;
  /** Request bodies the load generator cycles through (fhirgate: one per prepared conversation). */
  bodies(stream: boolean): readonly string[];
  /** The conversations its turns continue, in rotation (the floor and fhirgate); undefined when it keeps none. */
  readonly conversations?: number;
  stop(): Promise<void>;
}

/** The one prompt every contender is sent. */
export const PROMPT = 'Summarise the last visit and list what to check next time.';

/** The model name sent to the emulator (fhirgate is configured with it through AI_MODEL). */
export const MODEL = 'bench-model';

/** The OpenAI request the floor and the pass-through gateways get. */
export function plainChatBody(stream: boolean): string {
  return JSON.stringify({ model: MODEL, stream, messages: [{ role: 'user', content: PROMPT }] });
}

/** Tail of a process's stderr kept for error messages, so a piped stream never fills up and blocks the child. */
export function keepTail(stream: NodeJS.ReadableStream | null, limit = 4_000): () => string {
  let tail = '';
  stream?.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-limit);
  });
  return () => tail;
}
