/**
 * Responses are fhirgate's records: `resp_<id>` is the reply Communication `<id>`, read through the caller's
 * repository (what the caller's AccessPolicy does not show, or fhirgate did not write, is not found). From them:
 * - `previous_response_id` continues the reply's conversation, which must not have moved on since (a conversation
 *   is one thread: see `requireLatestReply`);
 * - `item_reference` items are read back from the reply they name, with the patients the reply is about (the turn
 *   that takes them in is about those patients too: chat/turn-subject.ts);
 * - `GET /v1/responses/{id}` (and a request repeated under its Idempotency-Key) rebuilds the response from the reply
 *   and its prompt.
 */
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { agentAuthored } from '../chat/agent-device.ts';
import { findCommunication, NO_SIDE_REQUESTS, type ConversationReader, type ConversationState } from '../chat/conversation.ts';
import { replySubjects } from '../chat/conversation-subjects.ts';
import type { ReferencedRecord } from '../chat/chat-request.ts';
import { CATEGORY } from '../chat/fhir-vocabulary.ts';
import { categoryOf, communicationIdOf, recordedRequest, replyFacts, replyText, toolCallsOf } from '../chat/recorded-messages.ts';
import type { ReplyStatus } from '../chat/communication-builders.ts';
import type { ChatToolCall } from '../llm/chat-model.ts';
import { outputItems, parseOutputItemId, responseEndOf, responseIdOf, type ResponseFields } from './response-object.ts';
import type { InputItem, ResolvedInputItem } from './response-input.ts';

/** A stored reply, with its conversation and its prompt. */
export interface StoredReply {
  readonly reply: WithId<Communication>;
  readonly rootId: string;
  readonly promptId: string;
}

/** The reply `replyId` as the caller may read it, if it is one fhirgate wrote; undefined otherwise. */
export async function findReply(reader: ConversationReader, replyId: string): Promise<StoredReply | undefined> {
  const reply = await findCommunication(reader.repo, replyId);
  const rootId = communicationIdOf(reply?.partOf?.[0]?.reference);
  const promptId = communicationIdOf(reply?.inResponseTo?.[0]?.reference);
  if (!reply || categoryOf(reply) !== CATEGORY.response.code || !rootId || !promptId || !(await agentAuthored([reply], reader.agent, reader.systemRepo, reader.authors)).has(reply.id)) {
    return undefined;
  }
  return { reply, rootId, promptId };
}

/** The reply `replyId`, or 404 naming `param`. */
export async function requireReply(reader: ConversationReader, replyId: string, param: string): Promise<StoredReply> {
  const stored = await findReply(reader, replyId);
  if (!stored) {
    throw new AppError('not_found', `Response '${responseIdOf(replyId)}' not found.`, { details: { param } });
  }
  return stored;
}

/**
 * A conversation is one thread: each turn continues from the one before it, so its history is what the model was
 * told and what the record reads, in order. A request continuing from a reply that is no longer the caller's newest
 * in the conversation (another turn of the caller's continued from it first) is refused; a failed reply
 * (`not-done`) does not count, as it is not part of the history either, so a request is retried with the same
 * `previous_response_id`. In a shared conversation (chat/conversation-ownership.ts) another user's turn may have
 * come after the caller's: the caller continues from its own latest response (its SDK's chain holds), or from the
 * conversation's latest, and the turn's history holds the other user's turn, quoted. Read from the page of the
 * conversation the turn reads for its history (conversation.ts); searched for only when the caller's latest reply is
 * not on it.
 */
export async function requireLatestReply(reader: ConversationReader, conversationId: string, conversation: ConversationState, replyId: string): Promise<void> {
  const latest = conversation.latestReplyId;
  if (latest === undefined || latest === replyId) {
    return;
  }
  const ownLatest = conversation.latestOwnReplyId ?? (conversation.readAll ? undefined : await latestReplyTo(reader, conversationId));
  if (ownLatest === replyId) {
    return;
  }
  throw new AppError(
    'invalid_request',
    `Invalid request: previous_response_id: ${responseIdOf(replyId)} is not your latest response in its conversation, nor the conversation's latest (${responseIdOf(latest)} is). ` +
      'fhirgate keeps a conversation as one thread: continue from its latest response, or start a new conversation with the earlier turns in input.',
    { details: { param: 'previous_response_id' } }
  );
}

/** Replies to the caller read to find the newest that did not fail (a user's record among them is passed over). */
const OWN_REPLY_CANDIDATES = 10;

/** The newest reply fhirgate wrote to a prompt of the caller's in the conversation that did not fail (side requests aside), if any. */
async function latestReplyTo(reader: ConversationReader, conversationId: string): Promise<string | undefined> {
  const caller = reader.caller?.reference;
  if (caller === undefined) {
    // A caller recorded as a logical reference is not searchable by recipient: the conversation's latest only.
    return undefined;
  }
  const candidates = await reader.repo.searchResources<Communication>({
    resourceType: 'Communication',
    filters: [{ code: 'part-of', operator: 'eq', value: `Communication/${conversationId}` }, { code: 'recipient', operator: 'eq', value: caller }, NO_SIDE_REQUESTS],
    sortRules: [{ code: 'sent', descending: true }],
    count: OWN_REPLY_CANDIDATES,
  });
  const replies = candidates.filter((candidate) => categoryOf(candidate) === CATEGORY.response.code && candidate.status !== 'not-done');
  const genuine = await agentAuthored(replies, reader.agent, reader.systemRepo, reader.authors);
  return replies.find((reply) => genuine.has(reply.id))?.id;
}

/** The request's items with their references read, and the records they took in. */
export interface ResolvedReferences {
  readonly items: ResolvedInputItem[];
  /** Each referenced reply once, with the patients it is about and the first field that named it. */
  readonly referenced: ReferencedRecord[];
}

/**
 * Reads the items that `item_reference`s name, in place; an item that cannot be read is a 404 naming it. Each
 * reply read comes with the patients it is about (chat/conversation-subjects.ts).
 */
export async function resolveReferences(reader: ConversationReader, items: readonly InputItem[]): Promise<ResolvedReferences> {
  const replies = new Map<string, Promise<StoredReply | undefined>>();
  const resolved: ResolvedInputItem[] = [];
  const referenced = new Map<string, Promise<ReferencedRecord>>();
  for (const item of items) {
    if (item.kind !== 'reference') {
      resolved.push(item);
      continue;
    }
    const target = parseOutputItemId(item.id);
    const stored = target ? await getOrRead(replies, target.replyId, () => findReply(reader, target.replyId)) : undefined;
    const call = target?.kind === 'function_call' ? (stored ? toolCallsOf(stored.reply)[target.index] : undefined) : undefined;
    if (!target || !stored || (target.kind === 'function_call' && !call)) {
      throw new AppError('not_found', `Item '${item.id.slice(0, 128)}' not found.`, { details: { param: `input.${item.index}.id` } });
    }
    resolved.push(call ? { kind: 'function_call', index: item.index, call } : { kind: 'assistant', index: item.index, text: replyText(stored.reply) });
    const reference = `Communication/${stored.reply.id}`;
    const param = `input.${item.index}.id`;
    await getOrRead(referenced, reference, async () => ({ reference, param, subjects: await replySubjects(reader, stored.reply) }));
  }
  return { items: resolved, referenced: await Promise.all(referenced.values()) };
}

/** A stored turn as a response: its Response object's fields, and the reply's text and calls. */
export interface RecordedResponse {
  readonly fields: ResponseFields;
  readonly text: string;
  readonly toolCalls: readonly ChatToolCall[];
}

/** The response a stored turn stands for, rebuilt from its reply and its prompt (the request body, when it was sent). */
export function recordedResponse(prompt: Communication | undefined, { reply, rootId }: StoredReply): RecordedResponse {
  const { modelId, finishReason, usage } = replyFacts(reply);
  const end = responseEndOf(reply.status as ReplyStatus, finishReason, reply.statusReason?.text);
  const text = replyText(reply);
  const toolCalls = toolCallsOf(reply);
  const fields: ResponseFields = {
    replyId: reply.id,
    conversationId: rootId,
    created: secondsOf(prompt?.sent ?? reply.sent),
    completed: secondsOf(reply.sent),
    modelId,
    end,
    output: outputItems(reply.id, text, toolCalls, end.status === 'completed' ? 'completed' : 'incomplete'),
    usage: usage ?? null,
    request: parseBody(prompt ? recordedRequest(prompt) : undefined),
  };
  return { fields, text, toolCalls };
}

/** The response `replyId` names, as the caller may read it. */
export async function readRecordedResponse(reader: ConversationReader, stored: StoredReply): Promise<RecordedResponse> {
  return recordedResponse(await findCommunication(reader.repo, stored.promptId), stored);
}

function parseBody(json: string | undefined): Record<string, unknown> {
  try {
    const body: unknown = json === undefined ? {} : JSON.parse(json);
    return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function secondsOf(instant: string | undefined): number {
  const time = Date.parse(instant ?? '');
  return Number.isNaN(time) ? 0 : Math.floor(time / 1000);
}

async function getOrRead<K, V>(cache: Map<K, Promise<V>>, key: K, read: () => Promise<V>): Promise<V> {
  let value = cache.get(key);
  if (!value) {
    value = read();
    cache.set(key, value);
  }
  return value;
}
