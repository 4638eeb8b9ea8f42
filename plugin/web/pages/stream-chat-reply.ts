/**
 * One chat turn, streamed (`POST /v1/chat/completions` with `stream: true`): the reply's text is handed on piece
 * by piece as it arrives; the conversation's id comes back to continue it with `conversation_id`, and the reply's
 * record (`communication_id`) to read what the model was given about the patient.
 */
import type { MedplumClient } from '@medplum/core';
import { FhirgateError, fhirgateFetch } from '../fhirgate-api.ts';
import { serverEventData } from '../server-events.ts';

export interface ChatTurn {
  readonly model: string;
  readonly prompt: string;
  /** The conversation to continue; a new one when absent. */
  readonly conversationId?: string;
  /** The patient the turn is about (`patient_id`). */
  readonly patientId?: string;
}

export interface ChatTurnResult {
  readonly conversationId: string | undefined;
  /** The reply's Communication, once fhirgate has recorded it (the last chunk names it). */
  readonly communicationId: string | undefined;
}

interface ChatChunk {
  readonly conversation_id?: string;
  readonly communication_id?: string;
  readonly choices?: readonly { readonly delta?: { readonly content?: string | null } }[];
  readonly error?: { readonly message?: string; readonly code?: string };
}

/**
 * Streams a turn's reply into `onText`; resolves with the conversation's id (and the reply's, when it finished)
 * once the reply is complete, or once `signal` stops it (fhirgate then records the reply `stopped`, with what was
 * delivered).
 */
export async function streamChatReply(medplum: MedplumClient, turn: ChatTurn, onText: (text: string) => void, signal?: AbortSignal): Promise<ChatTurnResult> {
  const response = await fhirgateFetch(medplum, 'v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
    body: JSON.stringify({
      model: turn.model,
      stream: true,
      messages: [{ role: 'user', content: turn.prompt }],
      ...(turn.conversationId ? { conversation_id: turn.conversationId } : {}),
      ...(turn.patientId ? { patient_id: turn.patientId } : {}),
    }),
    signal,
  });
  let conversationId = response.headers.get('X-Conversation-ID') ?? turn.conversationId;
  let communicationId: string | undefined;
  if (!response.body) {
    return { conversationId, communicationId };
  }
  try {
    for await (const data of serverEventData(response.body)) {
      if (data === '[DONE]') {
        break;
      }
      const chunk = JSON.parse(data) as ChatChunk;
      if (chunk.error) {
        throw new FhirgateError(500, chunk.error.message ?? 'The reply stopped with an error.', chunk.error.code);
      }
      conversationId = chunk.conversation_id ?? conversationId;
      communicationId = chunk.communication_id ?? communicationId;
      const text = chunk.choices?.[0]?.delta?.content;
      if (text) {
        onText(text);
      }
    }
  } catch (error) {
    if (!signal?.aborted) {
      throw error;
    }
  }
  return { conversationId, communicationId };
}
