/**
 * Steps 4–6 of a Responses turn in the Responses API's wire format, with the guarantees of the chat path
 * (docs/reliability.md): the reply is journaled as it goes out and recorded whatever way the turn ends.
 * - JSON: the chat path's delivery (deliver-json.ts), answered with a Response object.
 * - Streamed: `response.created` and `response.in_progress` once the provider's first event arrives (a failure
 *   before it is a plain HTTP error, after retries and fallbacks), the output items' events as the reply comes, the
 *   reply recorded, then the items' `.done` events and `response.completed` (or `response.incomplete`, cut by
 *   `max_output_tokens` or a filter). A provider failure after the first event is `response.failed` (the reply
 *   `not-done`); a server shutting down sends an `error` event (the reply `stopped`); a client that leaves leaves a
 *   `stopped` reply with the text it was sent, charged what the call cost (the call runs on, unseen, for at most
 *   `usageWaitMs`, then is cancelled: chat/client-departure.ts). Never a silent close.
 */
import type { Response } from 'express';
import { toAppError, type AppError } from '../errors.ts';
import type { ChatCompletion, ChatFinishReason, ChatStreamEvent, ChatToolCall } from '../llm/chat-model.ts';
import { recordFailure, recordReply, type ChatTurn } from '../chat/chat-turn.ts';
import { ClientDeparture, closeUpstream, ProviderOutput, runOn } from '../chat/client-departure.ts';
import { clientStillConnected } from '../chat/client-presence.ts';
import { deliverJson } from '../chat/deliver-json.ts';
import { isShutdownAbort, shuttingDownError } from '../chat/in-flight-turns.ts';
import { ResponseEventWriter } from './response-event-writer.ts';
import { outputItems, responseEndOf, responseObject, type ResponseFields } from './response-object.ts';
import type { RecordedResponse } from './stored-responses.ts';
import { StreamedOutput } from './streamed-output.ts';
import { annotateRequest } from '../telemetry/request-telemetry.ts';

/** Delivers a Responses turn, JSON or streamed as its request asks. */
export async function deliverResponse(turn: ChatTurn, response: Response): Promise<void> {
  await (turn.chat.stream ? deliverResponseStream(turn, response) : deliverJson(turn, response, responseAnswer));
}

/** The Response object of a turn whose reply completed. */
function responseAnswer(turn: ChatTurn, completion: ChatCompletion): Record<string, unknown> {
  const withLogprobs = turn.modelRequest.options?.logprobs !== undefined;
  const end = responseEndOf('completed', completion.finishReason);
  const output = outputItems(turn.replyId, completion.text, completion.toolCalls ?? [], 'completed', withLogprobs ? (completion.logprobs ?? []) : undefined);
  return responseObject({ ...fieldsOf(turn), completed: nowSeconds(), end, output, usage: completion.usage ?? null });
}

async function deliverResponseStream(turn: ChatTurn, response: Response): Promise<void> {
  const { controller } = turn;
  const events = new ResponseEventWriter(response, controller.signal);
  const output = new StreamedOutput(events, turn.replyId, turn.modelRequest.options?.logprobs !== undefined);
  const departure = new ClientDeparture(response, controller, turn.usageWaitMs ?? 0);
  const startStream = async (): Promise<void> => {
    if (!events.started) {
      events.start({ 'X-Conversation-ID': turn.rootId });
      await sendOpening(events, fieldsOf(turn));
    }
  };
  let finishReason: ChatFinishReason = 'stop';
  // Everything the provider generates, seen by the client or not: what a reply that does not complete is charged.
  const generated = new ProviderOutput();
  const upstream = turn.target.model.stream({ ...turn.modelRequest, signal: controller.signal })[Symbol.asyncIterator]();
  const cut = { turn, response, events, output, upstream, generated, departure };
  try {
    for (let next = await upstream.next(); !next.done; next = await upstream.next()) {
      const event = next.value;
      generated.observe(event);
      if (departure.left) {
        // Nobody to send it to: the rest of the call only tells what it cost.
        break;
      }
      await startStream();
      if (event.type === 'text') {
        // Journaled before it goes out: if the process dies, the next start records what the client may have seen.
        // Written at once, piece by piece (chat completions' writer holds its frames for the journal's batch instead).
        turn.records.delivered(turn.replyId, event.text);
        turn.records.writeWaiting();
        await output.addText(event.text, event.logprobs);
      } else if (event.type === 'tool_call') {
        await output.addToolCall(event);
      } else {
        finishReason = event.finishReason;
      }
    }
    await startStream();
  } catch (error) {
    await endCut(cut, error);
    return;
  } finally {
    departure.stopWatching();
  }
  // `completed` only if the client is still there for the end (see deliver-stream.ts).
  if (departure.left || !(await clientStillConnected(response))) {
    await leftEarly(cut);
    return;
  }
  const usage = generated.usage;
  const toolCalls: ChatToolCall[] = output.toolCalls;
  try {
    await recordReply(turn, { status: 'completed', text: output.text, toolCalls, usage, finishReason });
  } catch (error) {
    await sendInBand(events, errorEvent(toAppError(error), response));
    throw error;
  }
  // The reply is on record: a client that leaves now misses only the end of the stream, not an error of ours.
  const end = responseEndOf('completed', finishReason);
  const final = responseObject({ ...fieldsOf(turn), completed: nowSeconds(), end, output: output.items('completed'), usage: usage ?? null });
  await output
    .close()
    .then(() => sendInBand(events, { type: terminalEventOf(end), response: final }))
    .catch(() => events.end());
}

/**
 * A stored response as a stream, all at once: its opening, its text in one delta and each call in one, the items'
 * `.done` events and the event that ends it. For a request repeated under its Idempotency-Key, and
 * `GET /v1/responses/{id}?stream=true`; events numbered up to `startingAfter` are left out.
 */
export async function streamRecordedResponse(response: Response, recorded: RecordedResponse, headers: Readonly<Record<string, string>>, startingAfter?: number): Promise<void> {
  const { fields, text, toolCalls } = recorded;
  const events = new ResponseEventWriter(response, undefined, startingAfter);
  const output = new StreamedOutput(events, fields.replyId, false);
  events.start(headers);
  await sendOpening(events, fields);
  if (text) {
    await output.addText(text);
  }
  for (const [index, call] of toolCalls.entries()) {
    await output.addToolCall({ index, ...call });
  }
  await output.close();
  await sendInBand(events, { type: terminalEventOf(fields.end), response: responseObject(fields) });
}

/** A stream under way: the turn, its client, what went out to it, and the provider call. */
interface StreamUnderWay {
  readonly turn: ChatTurn;
  readonly response: Response;
  readonly events: ResponseEventWriter;
  readonly output: StreamedOutput;
  readonly upstream: AsyncIterator<ChatStreamEvent>;
  /** Everything the provider generated, seen by the client or not. */
  readonly generated: ProviderOutput;
  readonly departure: ClientDeparture;
}

/** A stream that ended before the reply did: recorded as it ended, and told in-band when the client is still there. */
async function endCut(cut: StreamUnderWay, error: unknown): Promise<void> {
  const { turn, response, events, output, upstream, generated, departure } = cut;
  const { controller } = turn;
  if (isShutdownAbort(controller.signal) && !response.destroyed) {
    await closeUpstream(upstream);
    await recordReply(turn, { status: 'stopped', text: output.text, reason: 'The server shut down before the reply finished.', usage: generated.usage, generatedCharacters: generated.characters });
    if (!events.started) {
      throw shuttingDownError();
    }
    await sendInBand(events, errorEvent(shuttingDownError(), response));
    return;
  }
  if (departure.left || controller.signal.aborted || response.destroyed) {
    await leftEarly(cut);
    return;
  }
  await closeUpstream(upstream);
  const appError = await recordFailure(turn, output.text, error, generated.characters);
  if (!events.started) {
    throw appError;
  }
  const end = responseEndOf('not-done', undefined, appError.message);
  annotateRequest(response, { code: appError.code });
  await sendInBand(events, { type: 'response.failed', response: responseObject({ ...fieldsOf(turn), end, output: output.items('incomplete'), usage: null }) });
}

/**
 * A client that left before the end: the provider call runs on, unseen, until it ends or its deadline cancels it,
 * and the reply is `stopped` with the text the client was sent, charged the provider's usage if it came, else an
 * estimate of what was generated.
 */
async function leftEarly(cut: StreamUnderWay): Promise<void> {
  await runOn(cut.upstream, cut.generated, cut.departure);
  cut.departure.dispose();
  await recordReply(cut.turn, { status: 'stopped', text: cut.output.text, reason: CLIENT_LEFT, usage: cut.generated.usage, generatedCharacters: cut.generated.characters });
}

/** Why a reply whose client left is `stopped`. */
const CLIENT_LEFT = 'The client closed the stream.';

/** What every Response object of the turn says (the model read now: a fallback may be the one answering). */
function fieldsOf(turn: ChatTurn): Omit<ResponseFields, 'end' | 'output' | 'usage'> {
  return { replyId: turn.replyId, conversationId: turn.rootId, created: turn.created, modelId: turn.target.id, request: turn.chat.body };
}

/** `response.created` and `response.in_progress`: the response, in progress, with no output yet. */
export async function sendOpening(events: ResponseEventWriter, fields: Omit<ResponseFields, 'end' | 'output' | 'usage'>): Promise<void> {
  const opening = responseObject({ ...fields, end: { status: 'in_progress' }, output: [] });
  await events.send({ type: 'response.created', response: opening });
  await events.send({ type: 'response.in_progress', response: opening });
}

/** The event that ends a stream whose response ended so (a cancelled one did not complete: `response.incomplete`). */
export function terminalEventOf(end: ResponseFields['end']): string {
  return end.status === 'completed' ? 'response.completed' : end.status === 'failed' ? 'response.failed' : 'response.incomplete';
}

/** The stream's `error` event: the spec's error, in the Responses API's event; its code goes on the request's log line. */
function errorEvent(error: AppError, response: Response): { type: 'error' } & Record<string, unknown> {
  annotateRequest(response, { code: error.code });
  const param = typeof error.details?.param === 'string' ? error.details.param : null;
  return { type: 'error', code: error.code, message: error.message, param };
}

/** The last event, then the end; a client that already left misses it (its reply is on record). */
async function sendInBand(events: ResponseEventWriter, event: { readonly type: string } & Record<string, unknown>): Promise<void> {
  try {
    await events.send(event);
  } catch {
    // The client is gone: there is nobody to tell.
  } finally {
    events.end();
  }
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
