/**
 * What a turn adds to its conversation: every message the client sent in it that the conversation does not hold yet,
 * recorded on the turn's prompt (prompt-messages.ts) and sent again, as history, with every later turn. OpenAI's
 * `previous_response_id` keeps every input item of every earlier turn in the same way.
 *
 * Instructions (`system` and `developer` messages) that open a request are the client's framing of that request:
 * clients that keep the history themselves send theirs again with every request. They are recorded with the turn; a
 * later turn that brings none of its own is sent those of the caller's newest turn that had some, first, as the
 * client would have sent them itself; a later turn that brings its own is sent its own only, never the earlier ones
 * as well (conversation.ts). Instructions an API sends apart from the messages (the Responses API's `instructions`,
 * which OpenAI's `previous_response_id` does not carry either) are not the turn's input: they are recorded with the
 * request body only.
 */
import type { ChatMessage } from '../llm/chat-model.ts';
import type { ChatRequest } from './chat-request.ts';

/** Whether a message is an instruction (`system`, `developer`). */
export function isInstruction(message: ChatMessage): boolean {
  return message.role === 'system' || message.role === 'developer';
}

/** The instructions `messages` open with: the system and developer messages before any other. */
export function openingInstructions(messages: readonly ChatMessage[]): ChatMessage[] {
  const end = messages.findIndex((message) => !isInstruction(message));
  return messages.slice(0, end < 0 ? messages.length : end);
}

/** The request's own messages: without the instructions its API sends apart from them. */
export function requestMessagesOf(chat: Pick<ChatRequest, 'messages' | 'instructionCount'>): readonly ChatMessage[] {
  return chat.messages.slice(chat.instructionCount ?? 0);
}

/**
 * The messages the request adds to its conversation, in order: all its own messages; or, when it sends an exchange
 * on record again (a history the client keeps, a tool loop that sends its latest exchange again: thread-digest.ts),
 * the instructions it opens with and the messages after its last assistant message.
 */
export function turnInputOf(chat: Pick<ChatRequest, 'messages' | 'instructionCount'>, repeatsExchange: boolean): ChatMessage[] {
  const own = requestMessagesOf(chat);
  if (!repeatsExchange) {
    return [...own];
  }
  const lastAssistant = own.findLastIndex((message) => message.role === 'assistant');
  const opening = openingInstructions(own);
  return [...opening, ...own.slice(Math.max(lastAssistant + 1, opening.length))];
}

/** The input without its opening instructions: what the turn asks (a side request's instruction among it). */
export function askedIn(input: readonly ChatMessage[]): ChatMessage[] {
  return input.slice(openingInstructions(input).length);
}
