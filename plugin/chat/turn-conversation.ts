/**
 * Which conversation a request belongs to, decided before anything of it is stored: the one it names
 * (`conversation_id`, or the Responses API's `previous_response_id` read into it), the caller's one whose latest
 * exchange it sends again as messages (a history the client keeps: repeated-exchange.ts), or the caller's one whose
 * exchange it quotes in its text (a side request: side-requests.ts); otherwise a new one.
 */
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { CallerContext } from '../host.ts';
import { callerParty } from './caller-reference.ts';
import type { ChatRequest } from './chat-request.ts';
import { readConversationRoot, type ConversationReader } from './conversation.ts';
import { mayContinue, requireMayContinue } from './conversation-ownership.ts';
import { findRepeatedConversation, type RepeatedConversation } from './repeated-exchange.ts';
import { findQuotedConversation, quotedExchanges } from './side-requests.ts';
import { repeatedExchangeOf, type RepeatedExchange, type ThreadScope } from './thread-digest.ts';

/** Where a request belongs (see the file's comment). */
export interface TurnPlace {
  /** The conversation's root; undefined: the request starts a conversation. */
  readonly root?: WithId<Communication>;
  /** What the request sends again of an earlier exchange (its messages up to its last assistant message). */
  readonly repeated?: RepeatedExchange;
  /** The reply of the exchange the request sends again or quotes (found even where the caller may not continue it). */
  readonly found?: RepeatedConversation;
  /** The request brings its conversation's exchange itself (sent again or quoted): no history is loaded for it. */
  readonly bringsHistory: boolean;
  /** The request quotes its conversation's exchange in its text: a side request about it. */
  readonly quotes: boolean;
}

/**
 * The conversation of the request: a named one only its starter continues, unless the project shares conversations
 * (403, nothing stored); an exchange sent again or quoted belongs to the conversation only where the caller may
 * continue it, else the request starts a conversation of its own. At most a read of the named root; or one search by
 * the digest of the exchange sent again, or (a request that sends none) one by the digests of the exchanges it
 * quotes, each with a read of the root found.
 */
export async function placeTurn(reader: ConversationReader, chat: ChatRequest, scope: ThreadScope, caller: CallerContext): Promise<TurnPlace> {
  const repeated = repeatedExchangeOf(scope, chat.messages);
  if (chat.conversationId) {
    const named = await readConversationRoot(reader, chat.conversationId);
    requireMayContinue(named, callerParty(caller.profile), caller.project);
    return { root: named, repeated, bringsHistory: false, quotes: false };
  }
  const sentAgain = repeated ? await findRepeatedConversation(reader, repeated, chat.patientId) : undefined;
  const quoted = sentAgain ? undefined : quotedExchanges(scope, chat.messages);
  const found = sentAgain ?? (quoted ? await findQuotedConversation(reader, quoted, chat.patientId) : undefined);
  const root = found && mayContinue(found.root, callerParty(caller.profile), caller.project) ? found.root : undefined;
  return { root, repeated, found, bringsHistory: root !== undefined, quotes: root !== undefined && sentAgain === undefined };
}
