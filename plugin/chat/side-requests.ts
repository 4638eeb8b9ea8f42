/**
 * Side requests: what chat UIs and agent frameworks ask about a conversation after a turn (its title, its tags,
 * follow-up questions to suggest), each a request of its own that brings the exchange again with an instruction.
 * Recorded as new conversations, they would leave a reviewer dozens of one-turn conversations that belong to one.
 * fhirgate records a side request with the conversation it is about (its prompt and reply `partOf` the
 * conversation's root) and marks both with a second category, `ai-side-request`: it is no turn of the conversation,
 * so it never enters the conversation's history, is never its latest exchange (for `previous_response_id` or a
 * client's repeated history) and answers none of its calls.
 *
 * A request is a side request of one of the caller's conversations when:
 * - it quotes the caller's latest exchange of it in its own text, as a transcript, and brings no assistant message:
 *   Open WebUI's task prompts (`<chat_history>` of `USER:` and `ASSISTANT:` lines: title, tags, follow-ups, search
 *   queries), LibreChat's title prompt (`User:` and `AI:`), LangChain's buffer (`Human:` and `AI:`). The exchange is
 *   found by its digest (`urn:fhirgate:exchange-digest` on the turn's reply): the user's last words and the reply's
 *   text, whatever the instruction around them says; or
 * - it continues the conversation (`conversation_id`, `previous_response_id`, or the exchange sent again as
 *   messages, thread-digest.ts) and all it asks is one user message that asks for the conversation's title or tags
 *   (an agent framework's follow-up call: "Generate a concise title for this conversation").
 * Anything else is a turn, as before. A side request that brings the conversation's exchange itself is sent as it
 * came (no history added); one that names the conversation gets its history, as a turn would.
 */
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import type { ChatMessage } from '../llm/chat-model.ts';
import { agentAuthored } from './agent-device.ts';
import { readConversationRoot, type ConversationReader } from './conversation.ts';
import { CATEGORY, SIDE_REQUEST_CATEGORY } from './fhir-vocabulary.ts';
import { categoryOf, communicationIdOf } from './recorded-messages.ts';
import type { RepeatedConversation } from './repeated-exchange.ts';
import { EXCHANGE_DIGEST_SYSTEM, exchangeDigest, type ThreadScope } from './thread-digest.ts';
import { askedIn } from './turn-input.ts';

/** Whether a stored prompt or reply is part of a side request. */
export function isSideRequest(communication: Communication): boolean {
  return (communication.category ?? []).some((concept) => concept.coding?.some((coding) => coding.code === SIDE_REQUEST_CATEGORY.code));
}

/** A verb that asks for something to be made, an object a side request asks for, and the conversation it is about. */
const ASKS_TO_MAKE = /\b(?:generate|create|write|provide|suggest|give|make|produce|propose)\b/i;
const SIDE_OBJECT = /\b(?:title|tags)\b/i;
const OF_CONVERSATION = /\b(?:conversation|chat|exchange|discussion|thread|dialog(?:ue)?)\b/i;

/**
 * Whether what a request continuing a conversation asks (its input without its opening instructions, turn-input.ts)
 * is one user message asking for the conversation's title or tags.
 */
export function asksForConversationLabel(input: readonly ChatMessage[]): boolean {
  const asked = askedIn(input);
  if (asked.length !== 1 || asked[0].role !== 'user') {
    return false;
  }
  const text = asked[0].content;
  return ASKS_TO_MAKE.test(text) && SIDE_OBJECT.test(text) && OF_CONVERSATION.test(text);
}

/** A line that opens a message of a transcript, and whose message it opens. */
const SPEAKER = /^(USER|User|Human|ASSISTANT|Assistant|AI):[ \t]?/gm;
const USER_LABELS = new Set(['USER', 'User', 'Human']);
/** Open WebUI's end of its quoted history. */
const HISTORY_END = /\n?<\/chat_history>/;
/** Exchanges of one transcript looked for, the newest ones: Open WebUI quotes six messages at most by default. */
const MAX_QUOTED_EXCHANGES = 8;

/**
 * The exchange digests of the transcript a request quotes (see the file's comment): each user message followed by a
 * reply in the last user message's text, newest last; undefined for a request with an assistant message or no
 * transcript.
 */
export function quotedExchanges(scope: ThreadScope, messages: readonly ChatMessage[]): string[] | undefined {
  if (messages.some((message) => message.role === 'assistant' || message.role === 'tool')) {
    return undefined;
  }
  const text = messages.findLast((message) => message.role === 'user')?.content ?? '';
  const starts = [...text.matchAll(SPEAKER)];
  const digests: string[] = [];
  for (const [index, start] of starts.entries()) {
    const next = starts[index + 1];
    if (!USER_LABELS.has(start[1]) || next === undefined || USER_LABELS.has(next[1])) {
      continue;
    }
    const after = starts[index + 2];
    const user = text.slice(start.index + start[0].length, next.index);
    const reply = text.slice(next.index + next[0].length, after?.index ?? text.length);
    digests.push(exchangeDigest(scope, user, after ? reply : reply.split(HISTORY_END)[0]));
  }
  return digests.length > 0 ? digests.slice(-MAX_QUOTED_EXCHANGES) : undefined;
}

/** Replies read for the quoted exchanges. */
const CANDIDATES = 5;

/**
 * The caller's conversation whose exchange a request quotes: the newest completed turn's reply the AI agent wrote
 * with one of `digests`, in a conversation the caller may read about the request's patient, or about any when the
 * request names none (quoting a conversation brings its patient's data: the side request is about that patient).
 * One search, and a read of the root when a reply is found.
 */
export async function findQuotedConversation(reader: ConversationReader, digests: readonly string[], patientId: string | undefined): Promise<RepeatedConversation | undefined> {
  const replies = (
    await reader.repo.searchResources<Communication>({
      resourceType: 'Communication',
      filters: [{ code: 'identifier', operator: 'eq', value: digests.map((digest) => `${EXCHANGE_DIGEST_SYSTEM}|${digest}`).join(',') }],
      sortRules: [{ code: 'sent', descending: true }],
      count: CANDIDATES,
    })
  ).filter((reply) => categoryOf(reply) === CATEGORY.response.code && reply.status === 'completed' && !isSideRequest(reply));
  const genuine = await agentAuthored(replies, reader.agent, reader.systemRepo, reader.authors);
  for (const reply of replies) {
    const rootId = communicationIdOf(reply.partOf?.[0]?.reference);
    if (!genuine.has(reply.id) || !rootId) {
      continue;
    }
    const root = await readRoot(reader, rootId);
    if (root) {
      return patientId === undefined || root.subject?.reference === `Patient/${patientId}` ? { root, reply } : undefined;
    }
  }
  return undefined;
}

async function readRoot(reader: ConversationReader, rootId: string): Promise<WithId<Communication> | undefined> {
  return readConversationRoot(reader, rootId).catch((error: unknown) => {
    if (AppError.isInstance(error) && error.code === 'conversation_not_found') {
      return undefined; // a conversation the caller may no longer read
    }
    throw error;
  });
}
