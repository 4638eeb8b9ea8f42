// The mutable state behind one emulator: which behaviour answers the next request, and what was received.
// Kept apart from the HTTP code so the in-process API and the control endpoints change it the same way.
import type { ServerResponse } from 'node:http';
import { InvalidBehaviourError, parseBehaviour } from './behaviour.ts';
import type { EmulatorBehaviour } from './behaviour.ts';
import { RequestLog } from './recording.ts';

/** Everything one emulator remembers between requests. */
export interface EmulatorState {
  readonly startupBehaviour: EmulatorBehaviour;
  defaultBehaviour: EmulatorBehaviour;
  readonly queue: EmulatorBehaviour[];
  readonly log: RequestLog;
  readonly models: readonly string[];
  /** Chat responses still open, so close() can wait until each has recorded its outcome. */
  readonly openResponses: Set<ServerResponse>;
  nextSequence: number;
}

/** Creates the state of a new emulator. */
export function createEmulatorState(
  startupBehaviour: EmulatorBehaviour,
  models: readonly string[],
  recordLimit: number,
): EmulatorState {
  return {
    startupBehaviour,
    defaultBehaviour: startupBehaviour,
    queue: [],
    log: new RequestLog(recordLimit),
    models,
    openResponses: new Set(),
    nextSequence: 1,
  };
}

/** Forgets received requests and queued behaviours, restores the startup behaviour, restarts sequence numbers. */
export function resetState(state: EmulatorState): void {
  state.defaultBehaviour = state.startupBehaviour;
  state.queue.length = 0;
  state.log.clear();
  state.nextSequence = 1;
}

/** How a behaviour written into a request's last user message starts: `[emulator-behaviour {...json...}]`. */
const MESSAGE_BEHAVIOUR_START = '[emulator-behaviour ';

/**
 * The JSON of a behaviour written into a message, or undefined when there is none. The object is read up to its
 * matching brace (strings and escapes respected), since a behaviour such as `toolCalls` holds `]` itself; an object
 * that never closes gives the rest of the text, which then fails to parse as JSON.
 */
export function findMessageBehaviour(text: string): string | undefined {
  const start = text.indexOf(MESSAGE_BEHAVIOUR_START);
  if (start === -1 || text[start + MESSAGE_BEHAVIOUR_START.length] !== '{') {
    return undefined;
  }
  const from = start + MESSAGE_BEHAVIOUR_START.length;
  let depth = 0;
  let inString = false;
  for (let index = from; index < text.length; index++) {
    const character = text[index];
    if (inString) {
      if (character === '\\') {
        index++;
      } else if (character === '"') {
        inString = false;
      }
    } else if (character === '"') {
      inString = true;
    } else if (character === '{') {
      depth++;
    } else if (character === '}' && --depth === 0) {
      return text.slice(from, index + 1);
    }
  }
  return text.slice(from);
}

/**
 * The behaviour for one chat request: the request's own header if it has one, else one written into its last user
 * message (a gateway in between passes the message on, not the header; every retry of it meets the same
 * behaviour), else the next queued behaviour, else the default. Neither the header nor the message consumes the
 * queue. Throws InvalidBehaviourError for a bad header or message behaviour.
 */
export function chooseBehaviour(state: EmulatorState, header: string | string[] | undefined, lastUserMessage = ''): EmulatorBehaviour {
  const inMessage = findMessageBehaviour(lastUserMessage);
  if (header === undefined && inMessage === undefined) {
    return state.queue.shift() ?? state.defaultBehaviour;
  }
  const text = header === undefined ? (inMessage ?? '') : Array.isArray(header) ? header.join(',') : header;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidBehaviourError('not valid JSON');
  }
  return parseBehaviour(value);
}
