import type { Response } from 'express';
import { toOpenAiErrorBody } from '../http/openai-error-response.ts';
import { toAppError, type AppError } from '../errors.ts';
import { annotateRequest } from '../telemetry/request-telemetry.ts';
import type { ChatFinishReason, ChatStreamEvent, ChatToolCall, ChatUsage } from '../llm/chat-model.ts';
import { answerFieldsOf, recordFailure, recordReply, type ChatTurn } from './chat-turn.ts';
import { completionChunk, contentChunkComposer, contentChunkWithLogprobs, finishChunk, openingDelta, toolCallDelta, usageChunk, type AnswerFields, type ToolCallFragment } from './wire-format.ts';
import { SseWriter } from './sse-writer.ts';
import { isShutdownAbort, shuttingDownError } from './in-flight-turns.ts';
import { clientStillConnected } from './client-presence.ts';
import { ClientDeparture, closeUpstream, ProviderOutput, runOn } from './client-departure.ts';

/**
 * Steps 4–6 for a streaming request, framed as the spec says: a first chunk with `delta.role`, content chunks,
 * a last chunk with an empty delta and `finish_reason`, then `data: [DONE]`. The reply's record is written once
 * all content is delivered and before that last chunk, so a client that sees the end can read the record.
 * Failures before the first byte are plain HTTP errors; after it, an in-band error event, then the end — never
 * a silent close. A client that leaves mid-stream leaves a `stopped` reply with the text delivered so far, charged
 * what the call cost: the provider call runs on, unseen, for at most `usageWaitMs` to end with its own usage, and
 * is then cancelled, the reply charged an estimate (client-departure.ts). A turn the server stops while shutting
 * down is recorded `stopped` as well (charged an estimate); its client gets an in-band `unavailable` error event
 * (or a 503 before the first byte).
 */
export async function deliverStream(turn: ChatTurn, response: Response): Promise<void> {
  const { controller } = turn;
  // Text events are held until the journal has written their text (the journal is the gate: reply-journal.ts).
  const sse = new SseWriter(response, controller.signal, turn.records);
  const departure = new ClientDeparture(response, controller, turn.usageWaitMs ?? 0);
  // Read per chunk: the model that answers is known once the first event arrives (a fallback may answer).
  const chunk = (delta: Record<string, unknown>): Record<string, unknown> => completionChunk(answerFieldsOf(turn), delta);
  const contentChunk = contentChunkComposer();
  // The first chunk carries the role; a reply that opens with a call carries the call in it too, as OpenAI's does.
  const startStream = async (firstCall?: ToolCallFragment): Promise<void> => {
    if (!sse.started) {
      sse.start({ 'X-Conversation-ID': turn.rootId });
      await sse.send(chunk(openingDelta(firstCall)));
    }
  };
  let sentFirst = false;

  // The calls the model asks the client to make, put together from their fragments for the reply's record.
  const toolCalls: { id: string; name: string; arguments: string }[] = [];
  let finishReason: ChatFinishReason = 'stop';
  // Everything the provider generates, seen by the client or not: what a reply that does not complete is charged.
  const output = new ProviderOutput();
  const upstream = turn.target.model.stream({ ...turn.modelRequest, signal: controller.signal })[Symbol.asyncIterator]();
  try {
    for (let next = await upstream.next(); !next.done; next = await upstream.next()) {
      const event = next.value;
      output.observe(event);
      if (departure.left) {
        // Nobody to send it to: the rest of the call only tells what it cost (below).
        break;
      }
      const opening = !sse.started;
      if (opening) {
        await startStream(event.type === 'tool_call' ? event : undefined);
      }
      if (event.type === 'text') {
        // Journaled before it goes out: if the process dies, the next start records what the client may have seen.
        turn.records.delivered(turn.replyId, event.text);
        const full = event.logprobs
          ? sse.send(contentChunkWithLogprobs(answerFieldsOf(turn), event.text, event.logprobs), event.text)
          : sse.sendJson(contentChunk(answerFieldsOf(turn), event.text), event.text);
        if (full) {
          await full;
        }
      } else if (event.type === 'tool_call') {
        const call = (toolCalls[event.index] ??= { id: '', name: '', arguments: '' });
        call.id ||= event.id ?? '';
        call.name ||= event.name ?? '';
        call.arguments += event.arguments;
        if (!opening) {
          await sse.send(chunk(toolCallDelta(event)));
        }
      } else if (event.type === 'finish') {
        finishReason = event.finishReason;
      }
      if (!sentFirst) {
        // The headers, the role chunk and the first token leave together, now; later events leave a tick's worth at a time.
        sentFirst = true;
        sse.flush();
      }
    }
    await startStream();
    await sse.released();
  } catch (error) {
    // The text recorded is the text handed to the socket: held events go first (or are dropped if the client left).
    await sse.released()?.catch(() => undefined);
    const delivered = sse.deliveredText;
    if (isShutdownAbort(controller.signal) && !response.destroyed) {
      await closeUpstream(upstream);
      await recordReply(turn, { status: 'stopped', text: delivered, reason: 'The server shut down before the reply finished.', usage: output.usage, generatedCharacters: output.characters });
      if (!sse.started) {
        throw shuttingDownError();
      }
      await sendInBandError(sse, response, shuttingDownError());
      return;
    }
    if (departure.left || controller.signal.aborted || response.destroyed) {
      await leftEarly(turn, upstream, output, departure, delivered);
      return;
    }
    // A failure of ours (the journal's write) leaves the provider call open: it is cancelled.
    await closeUpstream(upstream);
    const appError = await recordFailure(turn, delivered, error, output.characters);
    if (!sse.started) {
      throw appError;
    }
    await sendInBandError(sse, response, appError);
    return;
  } finally {
    departure.stopWatching();
  }

  // `completed` only if the client is still there for the end: a client that left while a busy host was still
  // writing gets `stopped`, with the text written before its departure was seen (and the usage, when it came).
  if (departure.left || !(await clientStillConnected(response))) {
    await leftEarly(turn, upstream, output, departure, sse.deliveredText);
    return;
  }
  const usage = output.usage;
  try {
    const calls: ChatToolCall[] = toolCalls.filter((call) => call !== undefined);
    await recordReply(turn, { status: 'completed', text: sse.deliveredText, toolCalls: calls, usage, finishReason });
  } catch (error) {
    await sendInBandError(sse, response, toAppError(error));
    throw error;
  }
  // The reply is on record: a client that leaves now misses only the end of the stream, not an error of ours.
  await sendEnd(sse, answerFieldsOf(turn), finishReason, turn.chat.includeUsage ? usage : null).catch(() => undefined);
}

/** Why a reply whose client left is `stopped`. */
const CLIENT_LEFT = 'The client closed the stream.';

/**
 * A client that left before the end: the provider call runs on, unseen, until it ends or its deadline cancels it
 * (client-departure.ts), and the reply is `stopped` with the text delivered, charged the provider's usage if it
 * came, else an estimate of what was generated.
 */
async function leftEarly(turn: ChatTurn, upstream: AsyncIterator<ChatStreamEvent>, output: ProviderOutput, departure: ClientDeparture, delivered: string): Promise<void> {
  await runOn(upstream, output, departure);
  departure.dispose();
  await recordReply(turn, { status: 'stopped', text: delivered, reason: CLIENT_LEFT, usage: output.usage, generatedCharacters: output.characters });
}

/** The last chunk, the usage chunk when asked for (`usage` not null), `[DONE]`, and the end of the stream. */
export async function sendEnd(sse: SseWriter, fields: AnswerFields, finishReason: ChatFinishReason, usage: ChatUsage | undefined | null): Promise<void> {
  await sse.send(finishChunk(fields, finishReason));
  if (usage !== null) {
    await sse.send(usageChunk(fields, usage));
  }
  await sse.send('[DONE]');
  sse.end();
}

/**
 * The in-band error event, then the end; a client that already left misses it (its reply is on record). The error's
 * code goes on the request's log line, whose status stays the stream's 200.
 */
async function sendInBandError(sse: SseWriter, response: Response, error: AppError): Promise<void> {
  annotateRequest(response, { code: error.code });
  try {
    await sse.send(toOpenAiErrorBody(error));
  } catch {
    // The client is gone: there is nobody to tell.
  } finally {
    sse.end();
  }
}
