// The knobs a test turns to make the emulated model misbehave, and the one parser every way of setting them
// goes through (in-process calls, the x-emulator-behaviour header, the /_emulator control endpoints), so a
// typo such as `latency` fails loudly instead of silently running the default behaviour.

/** How the emulator answers a chat request. Every field is optional; `{}` is a well-behaved instant model. */
export interface EmulatorBehaviour {
  /** Fixed reply text, instead of the default `Echo: <last user message>`. */
  reply?: string;
  /** A reply of exactly this many tokens ("token1 token2 …"); exclusive with `reply`. */
  replyTokens?: number;
  /** Milliseconds to wait before the first byte of the response (headers included). */
  latencyMs?: number;
  /** Pace of streamed tokens; 0 or absent streams as fast as the socket accepts. A non-streamed reply waits as long as streaming it would take. */
  tokensPerSecond?: number;
  /** Overrides the reported usage numbers (the reply text is unchanged). */
  usage?: { promptTokens?: number; completionTokens?: number };
  /** Answer with this HTTP status and an error body in the provider's shape. */
  errorStatus?: number;
  /** Message of the error body (for `errorStatus` and `streamErrorAfterTokens`). */
  errorMessage?: string;
  /** Adds `Retry-After: <seconds>` to an `errorStatus` response. */
  retryAfterSeconds?: number;
  /** Stream this many tokens, then destroy the socket without the stream terminator (non-streamed: half the body, then destroy). */
  cutAfterTokens?: number;
  /** Stream this many tokens, then an in-band error event in the provider's shape, then end the response cleanly. Streaming only. */
  streamErrorAfterTokens?: number;
  /** Accept the request and never answer, until the client goes away. */
  hang?: boolean;
  /** Send one invalid JSON chunk halfway through the stream, then carry on (non-streamed: an invalid JSON body). */
  malformed?: boolean;
  /**
   * A model that calls tools: step k (0-based) is made when k assistant tool-call rounds already happened since the
   * request's last user message; after the last step it answers with text. With `reply` (or `replyTokens`), a step's
   * reply is that text first, then the calls. No calls are made when the request offers no tools or says `none`.
   */
  toolCalls?: EmulatorToolCall[][];
}

/** One call of a `toolCalls` step. */
export interface EmulatorToolCall {
  name: string;
  /** The arguments object the model passes. */
  arguments: Record<string, unknown>;
  /** The call's id; by default `call_<sequence>_<index>` (OpenAI) or `toolu_<sequence>_<index>` (Anthropic). */
  id?: string;
}

/** Thrown when a behaviour does not parse; its message names the offending field. */
export class InvalidBehaviourError extends Error {
  override readonly name = 'InvalidBehaviourError';
}

const COUNT_FIELDS = [
  'replyTokens',
  'latencyMs',
  'retryAfterSeconds',
  'cutAfterTokens',
  'streamErrorAfterTokens',
] as const;
const BOOLEAN_FIELDS = ['hang', 'malformed'] as const;
const STRING_FIELDS = ['reply', 'errorMessage'] as const;
const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  ...COUNT_FIELDS,
  ...BOOLEAN_FIELDS,
  ...STRING_FIELDS,
  'tokensPerSecond',
  'usage',
  'errorStatus',
  'toolCalls',
]);
const TOOL_CALL_FIELDS: ReadonlySet<string> = new Set(['name', 'arguments', 'id']);

/** Parses a behaviour from untrusted JSON (or checks one built in code), rejecting unknown fields and bad values. */
export function parseBehaviour(value: unknown): EmulatorBehaviour {
  if (!isPlainObject(value)) {
    throw new InvalidBehaviourError('behaviour must be a JSON object');
  }
  for (const key of Object.keys(value)) {
    if (!KNOWN_FIELDS.has(key)) {
      throw new InvalidBehaviourError(`unknown behaviour field "${key}"`);
    }
  }
  const behaviour: EmulatorBehaviour = {};
  for (const field of COUNT_FIELDS) {
    if (value[field] !== undefined) {
      behaviour[field] = readCount(value[field], field);
    }
  }
  for (const field of BOOLEAN_FIELDS) {
    if (value[field] !== undefined) {
      if (typeof value[field] !== 'boolean') {
        throw new InvalidBehaviourError(`${field} must be a boolean`);
      }
      behaviour[field] = value[field];
    }
  }
  for (const field of STRING_FIELDS) {
    if (value[field] !== undefined) {
      if (typeof value[field] !== 'string') {
        throw new InvalidBehaviourError(`${field} must be a string`);
      }
      behaviour[field] = value[field];
    }
  }
  if (value.tokensPerSecond !== undefined) {
    const rate = value.tokensPerSecond;
    if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < 0) {
      throw new InvalidBehaviourError('tokensPerSecond must be a number >= 0');
    }
    behaviour.tokensPerSecond = rate;
  }
  if (value.errorStatus !== undefined) {
    const status = readCount(value.errorStatus, 'errorStatus');
    if (status < 400 || status > 599) {
      throw new InvalidBehaviourError('errorStatus must be between 400 and 599');
    }
    behaviour.errorStatus = status;
  }
  if (value.usage !== undefined) {
    behaviour.usage = parseUsage(value.usage);
  }
  if (value.toolCalls !== undefined) {
    behaviour.toolCalls = parseToolCalls(value.toolCalls);
  }
  if (behaviour.reply !== undefined && behaviour.replyTokens !== undefined) {
    throw new InvalidBehaviourError('reply and replyTokens are exclusive');
  }
  return behaviour;
}

function parseUsage(value: unknown): NonNullable<EmulatorBehaviour['usage']> {
  if (!isPlainObject(value)) {
    throw new InvalidBehaviourError('usage must be an object');
  }
  const usage: NonNullable<EmulatorBehaviour['usage']> = {};
  for (const key of Object.keys(value)) {
    if (key !== 'promptTokens' && key !== 'completionTokens') {
      throw new InvalidBehaviourError(`unknown usage field "${key}"`);
    }
    usage[key] = readCount(value[key], `usage.${key}`);
  }
  return usage;
}

function parseToolCalls(value: unknown): EmulatorToolCall[][] {
  if (!Array.isArray(value)) {
    throw new InvalidBehaviourError('toolCalls must be an array of steps, each an array of calls');
  }
  return value.map((step: unknown, stepIndex) => {
    if (!Array.isArray(step) || step.length === 0) {
      throw new InvalidBehaviourError(`toolCalls[${stepIndex}] must be a non-empty array of calls`);
    }
    return step.map((call: unknown, callIndex) => parseToolCall(call, `toolCalls[${stepIndex}][${callIndex}]`));
  });
}

function parseToolCall(value: unknown, path: string): EmulatorToolCall {
  if (!isPlainObject(value)) {
    throw new InvalidBehaviourError(`${path} must be an object {name, arguments, id?}`);
  }
  for (const key of Object.keys(value)) {
    if (!TOOL_CALL_FIELDS.has(key)) {
      throw new InvalidBehaviourError(`unknown field "${key}" in ${path}`);
    }
  }
  if (typeof value.name !== 'string' || value.name === '') {
    throw new InvalidBehaviourError(`${path}.name must be a non-empty string`);
  }
  if (!isPlainObject(value.arguments)) {
    throw new InvalidBehaviourError(`${path}.arguments must be an object`);
  }
  const call: EmulatorToolCall = { name: value.name, arguments: value.arguments };
  if (value.id !== undefined) {
    if (typeof value.id !== 'string' || value.id === '') {
      throw new InvalidBehaviourError(`${path}.id must be a non-empty string`);
    }
    call.id = value.id;
  }
  return call;
}

function readCount(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidBehaviourError(`${field} must be an integer >= 0`);
  }
  return value;
}

/** True for a JSON object (not null, not an array). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
