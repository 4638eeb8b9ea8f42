/**
 * Conversations the client keeps: most chat clients send the whole exchange again with every request (the
 * `openai` SDK's message list, the AI SDK's steps, LangChain's history) instead of naming a `conversation_id`.
 * fhirgate recognises such a request as the next turn of the conversation whose latest reply it repeats, so the
 * audit trail holds one conversation, not one per request.
 *
 * Each completed reply carries a digest of the exchange as its client saw it: the request's messages and the reply
 * (Communication.identifier, system `urn:fhirgate:thread-digest`). A later request whose messages, up to its last
 * assistant message, have the same digest repeats that exchange. The digest is scoped to the caller (project and
 * profile), so one user's exchange never matches another's, and it holds no text. Instructions (`system`,
 * `developer`) do not count: clients often change them per request (the date, a tool list). Tool calls' arguments
 * count as JSON values, since clients re-serialise them.
 */
import { hash } from 'node:crypto';
import type { ChatMessage, ChatToolCall } from '../llm/chat-model.ts';

/** The identifier system of the digest on a reply. */
export const THREAD_DIGEST_SYSTEM = 'urn:fhirgate:thread-digest';

/**
 * The identifier system of a turn's last exchange on its reply: its last user message and its reply's text, which a
 * side request quotes in its own text (side-requests.ts). Scoped like the thread digest; it holds no text either.
 */
export const EXCHANGE_DIGEST_SYSTEM = 'urn:fhirgate:exchange-digest';

/**
 * The digest of an exchange as a transcript quotes it: the user's words and the reply's text, each without the
 * whitespace around it (chat UIs strip it when they quote).
 */
export function exchangeDigest(scope: ThreadScope, userText: string, replyText: string): string {
  return hash('sha256', JSON.stringify([...scope, 'exchange', userText.trim(), replyText.trim()]), 'base64url');
}

/** The exchange digest of a completed turn: the request's last user message and the reply's text; none without either. */
export function turnExchangeDigest(scope: ThreadScope, requestMessages: readonly ChatMessage[], replyText: string): string | undefined {
  const user = requestMessages.findLast((message) => message.role === 'user');
  return user && user.content.trim() && replyText.trim() ? exchangeDigest(scope, user.content, replyText) : undefined;
}

/** Whose exchange it is: the caller's project and profile. */
export type ThreadScope = readonly [projectId: string, profile: string];

/** The digest of `messages` (the exchange so far, ending with a reply) for `scope`. */
export function threadDigest(scope: ThreadScope, messages: readonly ChatMessage[]): string {
  const canonical = messages.filter((message) => message.role !== 'system' && message.role !== 'developer').map(canonicalOf);
  return hash('sha256', JSON.stringify([...scope, canonical]), 'base64url');
}

/** The digest of a completed reply: the request's messages, then the reply as the client got it. */
export function replyDigest(scope: ThreadScope, requestMessages: readonly ChatMessage[], reply: { readonly text: string; readonly toolCalls?: readonly ChatToolCall[] }): string {
  return threadDigest(scope, [...requestMessages, { role: 'assistant', content: reply.text, toolCalls: reply.toolCalls }]);
}

/**
 * What a request repeats of an earlier exchange: its messages up to its last assistant message, their digest and
 * how many messages (instructions aside) they are. Undefined for a request with no assistant message.
 */
export function repeatedExchangeOf(scope: ThreadScope, messages: readonly ChatMessage[]): RepeatedExchange | undefined {
  const last = messages.findLastIndex((message) => message.role === 'assistant');
  if (last < 0) {
    return undefined;
  }
  const repeated = messages.slice(0, last + 1);
  return {
    digest: threadDigest(scope, repeated),
    messageCount: repeated.filter((message) => message.role !== 'system' && message.role !== 'developer').length,
  };
}

/** See {@link repeatedExchangeOf}. */
export interface RepeatedExchange {
  readonly digest: string;
  readonly messageCount: number;
}

function canonicalOf(message: ChatMessage): unknown[] {
  switch (message.role) {
    case 'assistant':
      return ['assistant', message.content, (message.toolCalls ?? []).map((call) => [call.id, call.name, jsonValueOf(call.arguments)])];
    case 'tool':
      return ['tool', message.toolCallId, message.content];
    default:
      return [message.role, message.content];
  }
}

/** Arguments as a JSON value when they are JSON (so spacing and key order do not count), else as they are. */
function jsonValueOf(text: string): unknown {
  try {
    return sortedKeys(JSON.parse(text) as unknown);
  } catch {
    return text;
  }
}

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(sortedKeys);
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortedKeys((value as Record<string, unknown>)[key])])
    );
  }
  return value;
}
