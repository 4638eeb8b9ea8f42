/**
 * Conversations: a root Communication (category `ai-conversation`) whose id is the `conversation_id`, and the
 * prompts and replies that are `partOf` it. Roots and replies are the AI agent's records (`meta.author` is the
 * project's agent Device, set by the server); prompts are the callers'. Only what fhirgate wrote counts: a
 * Communication a user wrote into a conversation (a reply "from" the agent, or a prompt no reply answers) is on
 * record, but never shown to the model as part of the conversation.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication, Device, Reference } from '@medplum/fhirtypes';
import { agentAuthored } from './agent-device.ts';
import { AppError } from '../errors.ts';
import type { ChatMessage } from '../llm/chat-model.ts';
import { CATEGORY } from './fhir-vocabulary.ts';
import { messagesOf, toolCallsOf } from './recorded-messages.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';

/** Who is asking about a conversation: the caller's repository, and how to tell the AI agent's records. */
export interface ConversationReader {
  /** The caller's repository: what the caller may read is what counts. */
  readonly repo: FhirRepository;
  /** The project's AI agent, the author of roots and replies. */
  readonly agent: Reference<Device>;
  /** The project's system repository, to read who wrote a record when the caller's does not show it. */
  readonly systemRepo: () => Promise<FhirRepository>;
}

/**
 * Reads the root of an existing conversation; one that does not exist, that the caller may not read, or that
 * fhirgate did not write (its author is not the project's AI agent) is 404.
 */
export async function readConversationRoot(reader: ConversationReader, conversationId: string): Promise<WithId<Communication>> {
  const root = await findCommunication(reader.repo, conversationId);
  if (!root || categoryOf(root) !== CATEGORY.conversation.code || !(await agentAuthored([root], reader.agent, reader.systemRepo)).has(root.id)) {
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
 * Step 3: the earlier prompts and replies of a conversation, oldest first, through the caller's repository. Only
 * turns fhirgate recorded count: replies the AI agent wrote, and the prompts those replies answer. Replies that
 * were cut short (`stopped`) count with the text that was delivered; failed ones (`not-done`) are left out. The
 * newest messages within the limits are kept; a prompt with tool results stands for several messages. The window
 * never opens with a tool result whose call it cut off.
 */
export async function loadHistory(reader: ConversationReader, conversationId: string, excludeId: string, limits: HistoryLimits): Promise<ConversationHistory> {
  const stored = await reader.repo.searchResources<Communication>({
    resourceType: 'Communication',
    filters: [{ code: 'part-of', operator: 'eq', value: `Communication/${conversationId}` }],
    sortRules: [{ code: 'sent', descending: true }],
    // A turn is a prompt and its reply.
    count: 2 * limits.maxMessages + 2,
  });
  const replies = await agentAuthored(
    stored.filter((communication) => categoryOf(communication) === CATEGORY.response.code),
    reader.agent,
    reader.systemRepo
  );
  const answered = new Set<string>();
  for (const communication of stored) {
    if (replies.has(communication.id)) {
      const prompt = communication.inResponseTo?.[0]?.reference;
      if (prompt) {
        answered.add(prompt);
      }
    }
  }
  const genuine = (communication: WithId<Communication>): boolean =>
    categoryOf(communication) === CATEGORY.response.code ? replies.has(communication.id) : answered.has(`Communication/${communication.id}`);
  // Newest first: each Communication's messages, last one first.
  const kept: { id: string; message: ChatMessage }[] = [];
  let characters = 0;
  let full = false;
  for (const communication of stored) {
    if (communication.id === excludeId || !genuine(communication)) {
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
 * empty when that reply asked for none. Only replies the AI agent wrote count.
 */
export async function readPendingToolCalls(reader: ConversationReader, conversationId: string): Promise<Set<string>> {
  const reply = (await readNewestReplies(reader, conversationId, 10))[0];
  return new Set(reply && reply.status === 'completed' ? toolCallsOf(reply).map((call) => call.id) : []);
}

/** The conversation's newest replies (of the last `count`) that the AI agent wrote, newest first. */
export async function readNewestReplies(reader: ConversationReader, conversationId: string, count: number): Promise<WithId<Communication>[]> {
  const newest = await reader.repo.searchResources<Communication>({
    resourceType: 'Communication',
    filters: [
      { code: 'part-of', operator: 'eq', value: `Communication/${conversationId}` },
      { code: 'category', operator: 'eq', value: CATEGORY.response.code },
    ],
    sortRules: [{ code: 'sent', descending: true }],
    count,
  });
  const authored = await agentAuthored(newest, reader.agent, reader.systemRepo);
  return newest.filter((candidate) => authored.has(candidate.id));
}

function categoryOf(communication: Communication): string | undefined {
  return communication.category?.[0]?.coding?.[0]?.code;
}
