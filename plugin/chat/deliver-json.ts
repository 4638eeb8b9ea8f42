import type { Response } from 'express';
import type { ChatCompletion } from '../llm/chat-model.ts';
import { answerFieldsOf, generatedCharactersOf, recordFailure, recordReply, type ChatTurn } from './chat-turn.ts';
import { completionBody } from './wire-format.ts';
import { clientStillConnected } from './client-presence.ts';
import { ClientDeparture } from './client-departure.ts';
import { isShutdownAbort, shuttingDownError } from './in-flight-turns.ts';
import { REPOSITORY_OPERATIONS_HEADER } from '../telemetry/repository-operations.ts';

/**
 * Steps 4–6 for a non-streaming request. The reply's record is written before the response is sent, so the
 * `communication_id` a client receives can be read at once. A provider failure leaves a `not-done` reply and
 * reaches the client as an error; a client that leaves first gets a `stopped` reply, and so does a turn the server
 * stops while shutting down (its client gets 503): charged the provider's usage when the call still ended (it runs
 * on for at most `usageWaitMs` after the client left: client-departure.ts), else the prompt's estimated tokens.
 * `answer` writes the body in the API's wire format (a `chat.completion` by default).
 */
export async function deliverJson(turn: ChatTurn, response: Response, answer: JsonAnswer = chatCompletionAnswer): Promise<void> {
  const { controller } = turn;
  const departure = new ClientDeparture(response, controller, turn.usageWaitMs ?? 0);
  try {
    const completion = await turn.target.model.complete({ ...turn.modelRequest, signal: controller.signal });
    const { text, toolCalls, usage, finishReason } = completion;
    // `completed` only for a client still there to receive it (a busy host may not have seen it leave yet).
    if (departure.left || !(await clientStillConnected(response))) {
      await recordReply(turn, { status: 'stopped', text: '', reason: 'The client closed the connection before the reply.', usage, generatedCharacters: generatedCharactersOf(text, toolCalls) });
      return;
    }
    await recordReply(turn, { status: 'completed', text, toolCalls, usage, finishReason });
    response.set('X-Conversation-ID', turn.rootId);
    if (turn.reportedOperations) {
      response.set(REPOSITORY_OPERATIONS_HEADER, turn.reportedOperations.toHeader());
    }
    response.json(answer(turn, completion));
  } catch (error) {
    if (isShutdownAbort(controller.signal)) {
      await recordReply(turn, { status: 'stopped', text: '', reason: 'The server shut down before the reply.' });
      throw shuttingDownError();
    }
    if (departure.left || controller.signal.aborted) {
      await recordReply(turn, { status: 'stopped', text: '', reason: 'The client closed the connection before the reply.' });
      return;
    }
    throw await recordFailure(turn, '', error);
  } finally {
    departure.dispose();
  }
}

/** The body of a JSON answer to a turn whose reply completed (and is on record). */
export type JsonAnswer = (turn: ChatTurn, completion: ChatCompletion) => Record<string, unknown>;

function chatCompletionAnswer(turn: ChatTurn, completion: ChatCompletion): Record<string, unknown> {
  const { text, finishReason, usage, toolCalls, logprobs } = completion;
  return completionBody(answerFieldsOf(turn), text, finishReason, usage, toolCalls, logprobs);
}
