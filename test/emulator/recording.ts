// What the emulator remembers about each chat request: exactly what the model was sent (so a test can assert
// on it) and how the exchange ended (so a chaos run can reconcile what the gateway claims against it).
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { EmulatorBehaviour } from './behaviour.ts';
import type { OutputOptions } from './output-options.ts';
import type { NormalizedMessage, NormalizedTool, NormalizedToolChoice, ProviderName } from './provider-format.ts';

/** How a request ended: still running, answered in full, answered with an error, cut by the emulator, or abandoned by the client. */
export type RequestOutcome = 'pending' | 'completed' | 'errored' | 'cut' | 'aborted';

/** One chat request as the emulator received it, and what became of it. */
export interface ReceivedRequest {
  /** Per-emulator sequence number, also used in the response's ids. */
  sequence: number;
  provider: ProviderName;
  /** The request target: path and query string (Azure's `api-version` is in it). */
  path: string;
  /** The model asked for; for Azure, the deployment in the path. */
  model: string;
  stream: boolean;
  /**
   * The conversation normalized to `{role, content}`, with `toolCalls` on assistant messages that call and
   * `toolCallId` (Ollama: `toolName`) on tool results; Anthropic's top-level `system` comes first as a system
   * message, and its `tool_result` blocks are `tool` messages of their own, before the user's text.
   */
  messages: NormalizedMessage[];
  /** The tools offered, normalized to `{name, description?, parameters}` (empty when none). */
  tools: NormalizedTool[];
  /** The tool choice sent, normalized (`auto`, `none`, `required`, `{name}`); absent when none was sent. */
  toolChoice?: NormalizedToolChoice;
  /**
   * What was asked of the reply, normalized: `responseFormat` (`json_object`, or `json_schema` with its schema),
   * `logprobs` (`{top}`), `reasoningEffort` (OpenAI's effort, Anthropic's `output_config.effort`, Ollama's `think`
   * as text) and `choices` (OpenAI's `n`, else 1).
   */
  output: OutputOptions;
  /** The request body as parsed JSON. */
  body: Record<string, unknown>;
  /** Request headers, lower-cased; credentials are replaced by `[REDACTED]` before they are stored. */
  headers: Record<string, string>;
  /** `sha256:` and the first 16 hex digits of the SHA-256 of the API key sent, so a test can tell which key was used. */
  credentialFingerprint?: string;
  /** Epoch milliseconds. */
  receivedAt: number;
  /** The behaviour that answered this request. */
  behaviour: EmulatorBehaviour;
  outcome: RequestOutcome;
  /** Reply tokens written to the socket (streamed deltas, or the whole reply for a non-streamed answer). */
  tokensSent: number;
  /** Epoch milliseconds when the outcome was settled. */
  finishedAt?: number;
}

/** Running counts over every request since the last reset, kept even when old records are dropped. */
export interface RequestTotals {
  requests: number;
  completed: number;
  errored: number;
  cut: number;
  aborted: number;
  tokensSent: number;
}

/** Marker stored instead of a credential header's value. */
export const REDACTED = '[REDACTED]';

// Anything that authenticates a caller is dropped on arrival, so a record can be printed or served as JSON.
const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'api-key',
  'x-api-key',
  'proxy-authorization',
  'cookie',
  'x-goog-api-key',
]);

/** Copies request headers with credential values replaced by {@link REDACTED}. */
export function redactHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const copy: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) {
      continue;
    }
    copy[name] = CREDENTIAL_HEADERS.has(name) ? REDACTED : Array.isArray(value) ? value.join(', ') : value;
  }
  return copy;
}

/** The fingerprint of the key a request carried (Bearer token, `api-key` or `x-api-key`), or undefined. */
export function credentialFingerprint(headers: IncomingHttpHeaders): string | undefined {
  const bearer = /^Bearer\s+(.+)$/i.exec(headers.authorization ?? '')?.[1];
  const key = bearer ?? firstValue(headers['api-key']) ?? firstValue(headers['x-api-key']);
  return key === undefined ? undefined : fingerprintOf(key);
}

/** `sha256:` and the first 16 hex digits of the key's SHA-256. */
export function fingerprintOf(key: string): string {
  return `sha256:${createHash('sha256').update(key).digest('hex').slice(0, 16)}`;
}

function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function createEmptyTotals(): RequestTotals {
  return { requests: 0, completed: 0, errored: 0, cut: 0, aborted: 0, tokensSent: 0 };
}

/** The record of requests and their outcomes, bounded so a long benchmark does not grow memory without end. */
export class RequestLog {
  /** Kept as the same array for the emulator's lifetime, so a test may hold on to it across resets. */
  readonly received: ReceivedRequest[] = [];
  readonly totals: RequestTotals = createEmptyTotals();
  readonly #recordLimit: number;

  constructor(recordLimit: number) {
    this.#recordLimit = recordLimit;
  }

  /** Adds a new request, dropping the oldest records beyond the limit. */
  add(record: ReceivedRequest): void {
    this.received.push(record);
    this.totals.requests++;
    if (this.received.length > this.#recordLimit) {
      this.received.splice(0, this.received.length - this.#recordLimit);
    }
  }

  /** Counts reply tokens written for a request. */
  countTokensSent(record: ReceivedRequest, count: number): void {
    record.tokensSent += count;
    this.totals.tokensSent += count;
  }

  /** Records how a request ended; the first outcome wins, later ones (a close after a cut) are ignored. */
  settle(record: ReceivedRequest, outcome: Exclude<RequestOutcome, 'pending'>): void {
    if (record.outcome !== 'pending') {
      return;
    }
    record.outcome = outcome;
    record.finishedAt = Date.now();
    this.totals[outcome]++;
  }

  /** Forgets every record and zeroes the totals. */
  clear(): void {
    this.received.length = 0;
    Object.assign(this.totals, createEmptyTotals());
  }
}
