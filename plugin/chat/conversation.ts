/**
 * Conversations: a root Communication (category `ai-conversation`) whose id is the `conversation_id`, and the
 * prompts and replies that are `partOf` it.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import type { ChatMessage } from '../llm/chat-model.ts';
import { CATEGORY } from './fhir-vocabulary.ts';
import { messagesOf, toolCallsOf } from './recorded-messages.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';

/** Reads the root of an existing conversation; one that does not exist, or that the caller may not read, is 404. */
export async function readConversationRoot(repo: FhirRepository, conversationId: string): Promise<WithId<Communication>> {
  const root = await findCommunication(repo, conversationId);
  const isRoot = root?.category?.some((concept) => concept.coding?.some((coding) => coding.code === CATEGORY.conversation.code));
  if (!root || !isRoot) {
    throw new AppError('conversation_not_found', `Conversation '${conversationId}' not found.`, { details: { param: 'conversation_id' } });
  }
  return root;
}

/** The Communication `id` as the caller sees it, or undefined when there is none (or the caller may not see it). */
export async function findCommunication(repo: FhirRepository, id: string): Promise<WithId<Communication> | undefined> {
  try {
    return await repo.readResource<Communication>('Communication', id);
  } catch (error) {
    if (isOutcomeStatus(error, 404)) {
      return undefined;
    }
    throw error;
  }
}

/** Limits on the history sent with a request, so long conversations stay within the model's budget. */
export interface HistoryLimits {
  /** Most recent messages kept. */
  readonly maxMessages: number;
  /** Total characters kept, counting from the most recent message back. */
  readonly maxCharacters: number;
}

/** The history of a conversation as it is sent to the model, and which stored messages it came from. */
export interface ConversationHistory {
  readonly messages: readonly ChatMessage[];
  /** Id of the oldest Communication included (undefined when none). */
  readonly oldestId?: string;
}

/**
 * Step 3: the earlier prompts and replies of a conversation, oldest first, through the caller's repository.
 * Replies that were cut short (`stopped`) count with the text that was delivered; failed ones (`not-done`) are
 * left out. The newest messages within the limits are kept; a prompt with tool results stands for several
 * messages. The window never opens with a tool result whose call it cut off.
 */
export async function loadHistory(
  repo: FhirRepository,
  conversationId: string,
  excludeId: string,
  limits: HistoryLimits
): Promise<ConversationHistory> {
  const stored = await repo.searchResources<Communication>({
    resourceType: 'Communication',
    filters: [{ code: 'part-of', operator: 'eq', value: `Communication/${conversationId}` }],
    sortRules: [{ code: 'sent', descending: true }],
    count: limits.maxMessages + 1,
  });
  // Newest first: each Communication's messages, last one first.
  const kept: { id: string; message: ChatMessage }[] = [];
  let characters = 0;
  let full = false;
  for (const communication of stored) {
    if (communication.id === excludeId) {
      continue;
    }
    for (const message of messagesOf(communication).reverse()) {
      if (kept.length >= limits.maxMessages || characters + message.content.length > limits.maxCharacters) {
        full = true;
        break;
      }
      characters += message.content.length;
      kept.push({ id: communication.id, message });
    }
    if (full) {
      break;
    }
  }
  kept.reverse();
  while (kept[0]?.message.role === 'tool') {
    kept.shift();
  }
  return { messages: kept.map((item) => item.message), oldestId: kept[0]?.id };
}

/**
 * The ids of the calls the conversation's newest reply asked the client to make, for a request that answers them;
 * empty when that reply asked for none.
 */
export async function readPendingToolCalls(repo: FhirRepository, conversationId: string): Promise<Set<string>> {
  const newest = await repo.searchResources<Communication>({
    resourceType: 'Communication',
    filters: [
      { code: 'part-of', operator: 'eq', value: `Communication/${conversationId}` },
      { code: 'category', operator: 'eq', value: CATEGORY.response.code },
    ],
    sortRules: [{ code: 'sent', descending: true }],
    count: 1,
  });
  return new Set(newest[0] && newest[0].status === 'completed' ? toolCallsOf(newest[0]).map((call) => call.id) : []);
}
