/**
 * Requests that send an earlier exchange again (thread-digest.ts): the conversation a request without
 * `conversation_id` continues, and the history of a named conversation without the turns the request repeats.
 */
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { agentAuthored } from './agent-device.ts';
import { readConversationRoot, type ConversationHistory, type ConversationReader } from './conversation.ts';
import { CATEGORY } from './fhir-vocabulary.ts';
import { categoryOf, communicationIdOf } from './recorded-messages.ts';
import { THREAD_DIGEST_SYSTEM, type RepeatedExchange } from './thread-digest.ts';
import { isInstruction } from './turn-input.ts';

/** Replies read for one digest: the same exchange can end more than one conversation (a question asked twice). */
const CANDIDATES = 5;

/** The conversation a request continues by repeating its exchange, and the reply of the exchange it repeats. */
export interface RepeatedConversation {
  readonly root: WithId<Communication>;
  readonly reply: WithId<Communication>;
}

/**
 * The caller's conversation whose latest exchange the request repeats: the newest completed reply the AI agent wrote
 * with the request's digest, in a conversation the caller may read about the same patient (or none, as the
 * request), with its root. Undefined when there is none: the request starts a conversation, as before. One search,
 * and a read of the root when a reply is found.
 */
export async function findRepeatedConversation(reader: ConversationReader, exchange: RepeatedExchange, patientId: string | undefined): Promise<RepeatedConversation | undefined> {
  const replies = (
    await reader.repo.searchResources<Communication>({
      resourceType: 'Communication',
      filters: [{ code: 'identifier', operator: 'eq', value: `${THREAD_DIGEST_SYSTEM}|${exchange.digest}` }],
      sortRules: [{ code: 'sent', descending: true }],
      count: CANDIDATES,
    })
  ).filter((reply) => categoryOf(reply) === CATEGORY.response.code && reply.status === 'completed');
  const genuine = await agentAuthored(replies, reader.agent, reader.systemRepo, reader.authors);
  for (const reply of replies) {
    const rootId = communicationIdOf(reply.partOf?.[0]?.reference);
    if (!genuine.has(reply.id) || !rootId) {
      continue;
    }
    const root = await readConversationRoot(reader, rootId).catch((error: unknown) => {
      if (AppError.isInstance(error) && error.code === 'conversation_not_found') {
        return undefined; // a conversation the caller may no longer read
      }
      throw error;
    });
    if (root) {
      // A request about another patient (or about one where the conversation is about none) starts its own.
      return root.subject?.reference === (patientId === undefined ? undefined : `Patient/${patientId}`) ? { root, reply } : undefined;
    }
  }
  return undefined;
}

/**
 * The history of a named conversation to send before a request that repeats the conversation's latest exchange
 * (its newest `repeated` messages, instructions aside): the request brings those itself, so they are left out
 * rather than sent twice.
 */
export function withoutRepeated(history: ConversationHistory, repeated: number): ConversationHistory {
  let end = history.messages.length;
  for (let left = repeated; end > 0 && left > 0; end--) {
    if (!isInstruction(history.messages[end - 1])) {
      left--;
    }
  }
  const messages = history.messages.slice(0, end);
  const instructions = history.instructions ? { instructions: history.instructions, instructionsId: history.instructionsId } : {};
  return messages.length > 0 ? { ...instructions, messages, oldestId: history.oldestId } : { ...instructions, messages: [] };
}
