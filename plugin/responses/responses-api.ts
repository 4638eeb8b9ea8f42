/**
 * `POST /v1/responses` as a turn of the chat pipeline (chat-completion.ts runs it: authentication, admission,
 * the caller's slots, idempotency, the patient, the records, the journal): the body read into the same request a
 * chat completion makes, `previous_response_id` and `item_reference`s read from the caller's records, and the
 * reply answered as a Response object or its event stream.
 */
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { Response } from 'express';
import { AppError } from '../errors.ts';
import type { CallerContext } from '../host.ts';
import type { ChatMessage } from '../llm/chat-model.ts';
import type { ChatServices, TurnApi } from '../chat/chat-completion.ts';
import { checkToolResults, type ChatRequest } from '../chat/chat-request.ts';
import type { ConversationReader } from '../chat/conversation.ts';
import { requireStored } from '../chat/reply-records.ts';
import { REPLAYED_HEADER } from '../chat/idempotency.ts';
import { deliverResponse, streamRecordedResponse } from './deliver-response.ts';
import { toInputMessages } from './response-input.ts';
import { responseObject } from './response-object.ts';
import { parseResponsesDraft } from './responses-request.ts';
import { communicationIdOf } from '../chat/recorded-messages.ts';
import { callerParty } from '../chat/caller-reference.ts';
import { recordedResponse, requireLatestReply, requireReply, resolveReferences, type ResolvedReferences } from './stored-responses.ts';

/** A Responses request, read into the chat pipeline's request. */
export interface ResponsesRequest extends ChatRequest {
  /** The reply `previous_response_id` names: the turn continues from it, and from nothing later. */
  readonly previousReplyId?: string;
}

/** The Responses API's side of a turn. */
export const RESPONSES_API: TurnApi<ResponsesRequest> = {
  readRequest: readResponsesRequest,
  checkConversation: async (request, conversation, repeatsLatest, reader) => {
    // A client's tool loop names its first response at every step and sends the steps since: it continues from the latest.
    if (request.previousReplyId !== undefined && request.conversationId !== undefined && !repeatsLatest) {
      await requireLatestReply(reader, request.conversationId, conversation, request.previousReplyId);
    }
  },
  deliver: deliverResponse,
  replay: replayResponse,
};

/** Reads the caller's records as the chat pipeline does: through the caller's repository, telling the AI agent's records by their author. */
export async function readerFor(services: ChatServices, caller: CallerContext): Promise<ConversationReader> {
  const agent = await requireStored(() => services.agents.referenceFor(caller.project.id));
  let systemRepo: ReturnType<ConversationReader['systemRepo']> | undefined;
  return {
    repo: caller.repo,
    agent,
    systemRepo: () => (systemRepo ??= services.host.getSystemRepo(caller.project.id)),
    authors: services.agents.authors,
    caller: callerParty(caller.profile),
  };
}

/**
 * The body validated first (a 400 reads nothing), then the records it names: the previous response (its
 * conversation is the one continued) and the items its `item_reference`s name.
 */
async function readResponsesRequest(body: unknown, services: ChatServices, caller: CallerContext): Promise<ResponsesRequest> {
  const draft = parseResponsesDraft(body, services.limits);
  let conversationId = draft.conversationId;
  let items = draft.items;
  let referenced: ResolvedReferences['referenced'] | undefined;
  if (draft.previousReplyId !== undefined || items.some((item) => item.kind === 'reference')) {
    const reader = await readerFor(services, caller);
    if (draft.previousReplyId !== undefined) {
      conversationId = (await requireReply(reader, draft.previousReplyId, 'previous_response_id')).rootId;
    }
    // What the referenced replies are about makes the turn's patient (chat/turn-subject.ts).
    ({ items, referenced } = await resolveReferences(reader, items));
  }
  const input = toInputMessages(items.filter((item) => item.kind !== 'reference'));
  // Instructions are this request's: sent first, recorded with the request body, not the turn's input, so not carried
  // to the next response (as with OpenAI's previous_response_id); system and developer input items are input.
  const instructions: ChatMessage[] = draft.instructions ? [{ role: 'system', content: draft.instructions }] : [];
  const messages = [...instructions, ...input.messages];
  if (!messages.some((message) => message.role === 'user' || message.role === 'tool')) {
    throw new AppError('invalid_request', 'Invalid request: input must contain a user message, or function call outputs.', { details: { param: 'input' } });
  }
  const answersEarlierCalls = checkToolResults(messages, conversationId, (index) => `input.${input.itemIndex[index - instructions.length]}.call_id`);
  return {
    messages,
    instructionCount: instructions.length,
    answersEarlierCalls,
    stream: draft.stream,
    model: draft.model,
    conversationId,
    patientId: draft.patientId,
    patientContext: draft.patientContext,
    maxTokens: draft.maxTokens,
    temperature: draft.temperature,
    includeUsage: false,
    tools: draft.tools,
    toolChoice: draft.toolChoice,
    options: draft.options,
    body: draft.body,
    referenced,
    previousReplyId: draft.previousReplyId,
  };
}

/** The recorded turn, answered again (`Idempotent-Replayed: true`), JSON or streamed as this request asks. */
async function replayResponse(request: ResponsesRequest, prompt: WithId<Communication>, reply: WithId<Communication>, response: Response): Promise<void> {
  const rootId = communicationIdOf(prompt.partOf?.[0]?.reference) ?? '';
  const recorded = recordedResponse(prompt, { reply, rootId, promptId: prompt.id });
  const headers = { 'X-Conversation-ID': rootId, [REPLAYED_HEADER]: 'true' };
  if (!request.stream) {
    response.set(headers).json(responseObject(recorded.fields));
    return;
  }
  await streamRecordedResponse(response, recorded, headers);
}
