/**
 * Sends a completed turn again, from its records, to a client that repeats a request with the same
 * `Idempotency-Key`: the same ids, text, tool calls, model, finish reason and usage, JSON or streamed as this
 * request asks (a stream replays the text in one chunk, and each call in one). Marked `Idempotent-Replayed: true`.
 */
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { Response } from 'express';
import type { ChatRequest } from './chat-request.ts';
import { sendEnd } from './deliver-stream.ts';
import { SseWriter } from './sse-writer.ts';
import { REPLAYED_HEADER } from './idempotency.ts';
import { communicationIdOf, replyFacts, replyText, toolCallsOf } from './recorded-messages.ts';
import { completionBody, completionChunk, openingDelta, toolCallDelta, type AnswerFields } from './wire-format.ts';

const REPLAYED = { [REPLAYED_HEADER]: 'true' } as const;

/** Answers `chat` with the recorded turn. */
export async function replayTurn(chat: ChatRequest, prompt: WithId<Communication>, reply: WithId<Communication>, response: Response): Promise<void> {
  const conversationId = communicationIdOf(prompt.partOf?.[0]?.reference) ?? '';
  const { modelId, finishReason = 'stop', usage } = replyFacts(reply);
  const fields: AnswerFields = { completionId: `chatcmpl-${reply.id}`, created: createdOf(prompt), modelId, conversationId, replyId: reply.id, includeUsage: chat.includeUsage };
  const text = replyText(reply);
  const toolCalls = toolCallsOf(reply);
  if (!chat.stream) {
    response.set({ 'X-Conversation-ID': conversationId, ...REPLAYED }).json(completionBody(fields, text, finishReason, usage, toolCalls));
    return;
  }
  const sse = new SseWriter(response);
  sse.start({ 'X-Conversation-ID': conversationId, ...REPLAYED });
  // As the turn streamed it: a reply that opens with a call has it in its first chunk.
  const fragments = toolCalls.map((call, index) => ({ index, ...call }));
  const openingCall = text ? undefined : fragments.shift();
  await sse.send(completionChunk(fields, openingDelta(openingCall)));
  if (text) {
    await sse.send(completionChunk(fields, { content: text }));
  }
  for (const fragment of fragments) {
    await sse.send(completionChunk(fields, toolCallDelta(fragment)));
  }
  await sendEnd(sse, fields, finishReason, chat.includeUsage ? usage : null);
}

/** Unix seconds of the prompt's `sent`: the `created` of the turn's answers. */
export function createdOf(prompt: Communication): number {
  return Math.floor(Date.parse(prompt.sent ?? '') / 1000);
}
