/**
 * Conversations: a root Communication (category `ai-conversation`) whose id is the `conversation_id`, and the
 * prompts and replies that are `partOf` it. Roots and replies are the AI agent's records (`meta.author` is the
 * project's agent Device, set by the server); prompts are the callers'. Only what fhirgate wrote counts: a
 * Communication a user wrote into a conversation (a reply "from" the agent, or a prompt no reply answers) is on
 * record, but never shown to the model as part of the conversation. Another user's turn (a project may share
 * conversations: conversation-ownership.ts) reaches the caller's model quoted as data (quoted-turns.ts).
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication, Device, Reference } from '@medplum/fhirtypes';
import { agentAuthored, type KnownAuthors } from './agent-device.ts';
import { AppError } from '../errors.ts';
import type { ChatMessage } from '../llm/chat-model.ts';
import { CATEGORY, SIDE_REQUEST_CATEGORY } from './fhir-vocabulary.ts';
import { openingInstructions } from './turn-input.ts';
import { categoryOf, communicationIdOf, messagesOf, toolCallsOf } from './recorded-messages.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';
import { partyKey } from './conversation-ownership.ts';
import { isOtherUsersTurn, otherUsersMessage, quotedEntry } from './quoted-turns.ts';
import { THREAD_DIGEST_SYSTEM } from './thread-digest.ts';

/** Who is asking about a conversation: the caller's repository, and how to tell the AI agent's records. */
export interface ConversationReader {
  /** The caller's repository: what the caller may read is what counts. */
  readonly repo: FhirRepository;
  /** The project's AI agent, the author of roots and replies. */
  readonly agent: Reference<Device>;
  /** The project's system repository, to read who wrote a record when the caller's does not show it. */
  readonly systemRepo: () => Promise<FhirRepository>;
  /** Authors of stored versions already known to this process (a version's author never changes). */
  readonly authors?: KnownAuthors;
  /**
   * The caller, as fhirgate records it as a prompt's sender: its own turns are its words; other users' turns reach
   * its model quoted as data. Undefined: every turn is sent as it was recorded.
   */
  readonly caller?: Reference;
}

/**
 * Reads the root of an existing conversation; one that does not exist, that the caller may not read, or that
 * fhirgate did not write (its author is not the project's AI agent) is 404.
 */
export async function readConversationRoot(reader: ConversationReader, conversationId: string): Promise<WithId<Communication>> {
  const root = await findCommunication(reader.repo, conversationId);
  if (!root || categoryOf(root) !== CATEGORY.conversation.code || !(await agentAuthored([root], reader.agent, reader.systemRepo, reader.authors)).has(root.id)) {
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
  /**
   * The instructions the caller's newest turn opened with, for a request that brings none of its own: sent first
   * (turn-input.ts). Absent or empty: none.
   */
  readonly instructions?: readonly ChatMessage[];
  /** The prompt those instructions are from. */
  readonly instructionsId?: string;
  readonly messages: readonly ChatMessage[];
  /** Id of the oldest Communication included (undefined when none). */
  readonly oldestId?: string;
}

/** How many messages a history sends: its instructions and its messages. */
export function historyCount(history: ConversationHistory): number {
  return (history.instructions?.length ?? 0) + history.messages.length;
}

/** What a reply's record says of the history sent with it (its `history` extension). */
export function historyRecordOf(history: ConversationHistory): { count: number; oldest?: string; instructions?: string } {
  return { count: historyCount(history), oldest: history.oldestId, instructions: history.instructionsId };
}

/** What the request brings that shapes its history. */
export interface HistoryRequest {
  /** The request opens with instructions of its own: no earlier turn's are sent with it. */
  readonly hasOwnInstructions: boolean;
}

/** What a continued turn reads of its conversation: the history, the calls its newest reply asked for, its latest reply. */
export interface ConversationState {
  readonly history: ConversationHistory;
  /**
   * The ids of the calls the conversation's newest reply asked the client to make, for a request that answers them;
   * empty when that reply asked for none (or did not complete). Only replies the AI agent wrote count.
   */
  readonly pendingCalls: ReadonlySet<string>;
  /**
   * The id of the conversation's latest reply: the newest the AI agent wrote that did not fail (`not-done`), which
   * the Responses API's `previous_response_id` must name. Undefined when the conversation has none.
   */
  readonly latestReplyId?: string;
  /** The digest of the exchange the latest reply ended, when it completed (thread-digest.ts). */
  readonly latestReplyDigest?: string;
  /**
   * The caller's own latest reply among what was read (the newest that did not fail and answered the caller's
   * prompt); undefined when none was read. In a shared conversation another user's turn may come after it.
   */
  readonly latestOwnReplyId?: string;
  /** The patients the records read are about (`Patient/<id>`): what the history carries, whatever the root says. */
  readonly subjects: ReadonlySet<string>;
  /** True when every record of the conversation was read (it ended within the pages read). */
  readonly readAll: boolean;
  /** True when the newest reply the AI agent wrote (whatever its status) was among the records read. */
  readonly latestReplyRead: boolean;
}

/** The search filter that leaves out a conversation's side requests (side-requests.ts): no turns of it. */
export const NO_SIDE_REQUESTS = { code: 'category', operator: 'not', value: SIDE_REQUEST_CATEGORY.code } as const;

/** The fewest Communications one page of history reads, so the newest reply is found even with a tiny limit. */
const MIN_HISTORY_PAGE = 10;

/**
 * Step 3: the earlier prompts and replies of a conversation, oldest first, through the caller's repository, read
 * before the turn's prompt is written (so it is not among them) with the checks the request needs. Only turns
 * fhirgate recorded count: replies the AI agent wrote, and the prompts those replies answer; side requests about
 * the conversation (side-requests.ts) are no turns of it, and are not read. Replies that were cut short (`stopped`)
 * count with the text that was delivered; failed ones (`not-done`) are left out. A prompt stands for every message
 * its turn added (turn-input.ts). The instructions each turn opened with are its framing: a request that brings none
 * is sent those of the caller's newest turn read that had some, first, counted first against the limits; the others
 * are not sent. The newest messages within the limits are kept. The window never opens with a tool result whose
 * call it cut off.
 *
 * One search reads the newest page of the conversation, as many Communications as the limit has messages: each
 * genuine Communication is at least one message, so in a conversation fhirgate wrote the page is enough and the
 * turn costs one search. The same page names the calls of the newest reply, the latest reply a Responses
 * request must continue from (and the caller's own latest), and the patients its records are about. A page that
 * ends before the limit is reached, or before a reply that did not fail (failed replies, prompts with no reply,
 * records a user wrote), is followed by the next records: as many as the window still has room for (at least
 * MIN_HISTORY_PAGE), or a page when it is full but has no reply yet. Other users' turns are quoted (quoted-turns.ts).
 */
export async function loadConversation(
  reader: ConversationReader,
  conversationId: string,
  limits: HistoryLimits,
  request: HistoryRequest = { hasOwnInstructions: false }
): Promise<ConversationState> {
  const pageSize = Math.max(limits.maxMessages, MIN_HISTORY_PAGE);
  const stored: WithId<Communication>[] = [];
  const replies = new Set<string>();
  const caller = partyKey(reader.caller);
  let offset = 0;
  let count = pageSize;
  for (;;) {
    const page = await reader.repo.searchResources<Communication>({
      resourceType: 'Communication',
      filters: [{ code: 'part-of', operator: 'eq', value: `Communication/${conversationId}` }, NO_SIDE_REQUESTS],
      sortRules: [{ code: 'sent', descending: true }],
      count,
      offset,
    });
    stored.push(...page);
    for (const id of await agentAuthored(
      page.filter((communication) => categoryOf(communication) === CATEGORY.response.code),
      reader.agent,
      reader.systemRepo,
      reader.authors
    )) {
      replies.add(id);
    }
    const window = historyWindow(stored, replies, limits, caller, !request.hasOwnInstructions);
    const latestReply = stored.find((communication) => replies.has(communication.id) && communication.status !== 'not-done');
    const readAll = page.length < count;
    if ((window.complete && latestReply) || readAll) {
      const latestReplyDigest = latestReply?.status === 'completed' ? latestReply.identifier?.find((identifier) => identifier.system === THREAD_DIGEST_SYSTEM)?.value : undefined;
      const latestOwnReply = caller === undefined ? latestReply : stored.find((communication) => replies.has(communication.id) && communication.status !== 'not-done' && !isOtherUsersTurn(communication, caller));
      return {
        history: window.history,
        pendingCalls: pendingCallsOf(stored, replies),
        latestReplyId: latestReply?.id,
        latestReplyDigest,
        latestOwnReplyId: latestOwnReply?.id,
        subjects: window.subjects,
        readAll,
        latestReplyRead: replies.size > 0,
      };
    }
    offset += count;
    // Each genuine record is at least one message: the next read is as many as the window still has room for (a
    // failed or empty reply on the first page leaves it a message or two short), a page when it looks for a reply.
    count = window.slotsLeft > 0 ? Math.max(MIN_HISTORY_PAGE, window.slotsLeft) : pageSize;
  }
}

/**
 * The history within the limits from what was read so far (newest first); `complete` once a limit was reached.
 * Other users' turns (when `caller` is given) are quoted: each run of them one `user` message (quoted-turns.ts).
 * `carryInstructions`: the request brings no instructions of its own, so the caller's newest turn's are sent.
 * `subjects`: the patients the genuine records read are about.
 */
function historyWindow(
  stored: readonly WithId<Communication>[],
  replies: ReadonlySet<string>,
  limits: HistoryLimits,
  caller: string | undefined,
  carryInstructions: boolean
): { history: ConversationHistory; complete: boolean; slotsLeft: number; subjects: ReadonlySet<string> } {
  const records = readRecords(stored, replies, caller);
  const subjects = new Set<string>();
  for (const record of records) {
    const subject = record.communication.subject?.reference;
    if (subject && record.genuine) {
      subjects.add(subject);
    }
  }
  const carried = carryInstructions ? carriedInstructions(records, limits) : undefined;
  // Newest first: each Communication's messages, last one first; another user's as the entry quoting it.
  const kept: { id: string; message: ChatMessage; quoted?: string }[] = [];
  const carriedCount = carried?.messages.length ?? 0;
  let characters = carried?.characters ?? 0;
  let full = false;
  for (const record of records) {
    if (!record.genuine) {
      continue;
    }
    const { communication, quoted } = record;
    const messages = turnMessagesOf(record);
    for (let index = messages.length - 1; index >= 0; index--) {
      const message = messages[index];
      const quotedText = quoted ? quotedEntry(communication, message) : undefined;
      const length = quotedText?.length ?? message.content.length;
      if (carriedCount + kept.length >= limits.maxMessages || characters + length > limits.maxCharacters) {
        full = true;
        break;
      }
      characters += length;
      kept.push({ id: communication.id, message, quoted: quotedText });
    }
    if (full) {
      break;
    }
  }
  const complete = full || carriedCount + kept.length >= limits.maxMessages;
  const slotsLeft = complete ? 0 : limits.maxMessages - carriedCount - kept.length;
  kept.reverse();
  while (kept[0] && kept[0].quoted === undefined && kept[0].message.role === 'tool') {
    kept.shift();
  }
  const messages: ChatMessage[] = [];
  let run: string[] = [];
  for (const item of kept) {
    if (item.quoted !== undefined) {
      run.push(item.quoted);
      continue;
    }
    if (run.length > 0) {
      messages.push(otherUsersMessage(run));
      run = [];
    }
    messages.push(item.message);
  }
  if (run.length > 0) {
    messages.push(otherUsersMessage(run));
  }
  const instructions = carried ? { instructions: carried.messages, instructionsId: carried.id } : {};
  return { history: { ...instructions, messages, oldestId: kept[0]?.id }, complete, slotsLeft, subjects };
}

/**
 * A stored record as the history reads it, each fact read once per turn: its category, whether it is one of the
 * conversation's turns (a reply the AI agent wrote, or a prompt such a reply answers), whether it is another user's
 * turn (quoted-turns.ts), and its messages once asked for.
 */
interface HistoryRecord {
  readonly communication: WithId<Communication>;
  readonly isPrompt: boolean;
  readonly genuine: boolean;
  readonly quoted: boolean;
  messages?: ChatMessage[];
}

function readRecords(stored: readonly WithId<Communication>[], replies: ReadonlySet<string>, caller: string | undefined): HistoryRecord[] {
  const answered = new Set<string>();
  for (const communication of stored) {
    if (replies.has(communication.id)) {
      const prompt = communicationIdOf(communication.inResponseTo?.[0]?.reference);
      if (prompt) {
        answered.add(prompt);
      }
    }
  }
  return stored.map((communication) => {
    const category = categoryOf(communication);
    const isReply = category === CATEGORY.response.code;
    const genuine = isReply ? replies.has(communication.id) : answered.has(communication.id);
    return { communication, isPrompt: category === CATEGORY.prompt.code, genuine, quoted: genuine && caller !== undefined && isOtherUsersTurn(communication, caller) };
  });
}

/** A record's messages, read from it once. */
function messagesOfRecord(record: HistoryRecord): ChatMessage[] {
  record.messages ??= messagesOf(record.communication);
  return record.messages;
}

/** A stored record's messages without the instructions its turn opened with (carried or superseded: see above). */
function turnMessagesOf(record: HistoryRecord): ChatMessage[] {
  const messages = messagesOfRecord(record);
  return record.isPrompt ? messages.slice(openingInstructions(messages).length) : messages;
}

/**
 * The instructions the newest of the caller's own prompts among `records` (newest first) that opened with some
 * opened with, if they fit within the limits by themselves.
 */
function carriedInstructions(records: readonly HistoryRecord[], limits: HistoryLimits): { id: string; messages: ChatMessage[]; characters: number } | undefined {
  for (const record of records) {
    if (!record.isPrompt || !record.genuine || record.quoted) {
      continue;
    }
    const messages = openingInstructions(messagesOfRecord(record));
    if (messages.length === 0) {
      continue;
    }
    const characters = messages.reduce((total, message) => total + message.content.length, 0);
    return messages.length <= limits.maxMessages && characters <= limits.maxCharacters ? { id: record.communication.id, messages, characters } : undefined;
  }
  return undefined;
}

/** The calls of the newest reply the AI agent wrote, when it completed; empty otherwise. */
function pendingCallsOf(stored: readonly WithId<Communication>[], replies: ReadonlySet<string>): ReadonlySet<string> {
  const newest = stored.find((communication) => replies.has(communication.id));
  return new Set(newest && newest.status === 'completed' ? toolCallsOf(newest).map((call) => call.id) : []);
}
