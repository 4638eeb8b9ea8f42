// Writes a planned reply to the socket and applies the behaviour's timing and failure knobs. Provider
// differences arrive as ready-made strings from the format, so this file has no provider branches.
import type { ServerResponse } from 'node:http';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EmulatorBehaviour } from './behaviour.ts';
import { sendJson } from './http-io.ts';
import type { ChatRequest, PlannedReply, ProviderFormat } from './provider-format.ts';
import type { ReceivedRequest, RequestLog } from './recording.ts';

// Without pacing, tokens go out in batches: one write per token would make a benchmark measure syscalls.
const TOKENS_PER_WRITE = 64;

/** One chat request being answered, with everything needed to answer it and to record how it ended. */
export interface ChatExchange {
  response: ServerResponse;
  format: ProviderFormat;
  request: ChatRequest;
  reply: PlannedReply;
  behaviour: EmulatorBehaviour;
  record: ReceivedRequest;
  log: RequestLog;
  /** Aborted when the connection closes, whoever closes it; every wait ends early on it. */
  connectionClosed: AbortSignal;
}

/** Answers a chat request as its behaviour says: latency, hang, error status, then a streamed or whole reply. */
export async function deliverChat(exchange: ChatExchange): Promise<void> {
  const { behaviour } = exchange;
  if (behaviour.latencyMs && !(await pause(behaviour.latencyMs, exchange.connectionClosed))) {
    return;
  }
  if (behaviour.hang) {
    // Nothing is written; the close listener records 'aborted' once the client gives up.
    return;
  }
  if (behaviour.errorStatus !== undefined) {
    sendError(exchange, behaviour.errorStatus, behaviour.errorMessage ?? `Emulated error ${behaviour.errorStatus}`);
    return;
  }
  if (exchange.request.stream) {
    await streamReply(exchange);
  } else {
    await sendWholeReply(exchange);
  }
}

function sendError(exchange: ChatExchange, status: number, message: string): void {
  const { response, format, reply, behaviour, record, log } = exchange;
  const headers = format.responseHeaders(reply.sequence);
  if (behaviour.retryAfterSeconds !== undefined) {
    headers['retry-after'] = String(behaviour.retryAfterSeconds);
  }
  sendJson(response, status, headers, format.renderError(status, message), () => log.settle(record, 'errored'));
}

async function sendWholeReply(exchange: ChatExchange): Promise<void> {
  const { response, format, request, reply, behaviour, record, log } = exchange;
  // A real model takes as long to generate a reply it returns whole as one it streams.
  if (behaviour.tokensPerSecond) {
    const generationMs = (reply.tokens.length / behaviour.tokensPerSecond) * 1000;
    if (!(await pause(generationMs, exchange.connectionClosed))) {
      return;
    }
  }
  const body = format.renderCompletion(request, reply);
  const headers = format.responseHeaders(reply.sequence);
  if (behaviour.cutAfterTokens !== undefined) {
    // Announce the full length, deliver half: the client sees the connection close mid-body.
    response.writeHead(200, {
      ...headers,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
    });
    response.write(body.slice(0, Math.floor(body.length / 2)));
    closeMidResponse(exchange);
    return;
  }
  if (behaviour.malformed) {
    // A complete HTTP response whose JSON does not parse.
    sendJson(response, 200, headers, body.slice(0, Math.floor(body.length / 2)), () => log.settle(record, 'completed'));
    return;
  }
  log.countTokensSent(record, reply.tokens.length);
  sendJson(response, 200, headers, body, () => log.settle(record, 'completed'));
}

async function streamReply(exchange: ChatExchange): Promise<void> {
  const { response, format, request, reply, behaviour, record, log, connectionClosed } = exchange;
  const frames = format.createStreamFrames(request, reply);
  response.writeHead(200, {
    ...format.responseHeaders(reply.sequence),
    'content-type': format.streamContentType,
    'cache-control': 'no-cache',
  });

  // The stream's units: the text tokens, then the frames of the calls; the knobs that count tokens count these.
  const textCount = reply.tokens.length;
  const unitCount = textCount + frames.toolCallFrames.length;
  const { cutAfterTokens, streamErrorAfterTokens } = behaviour;
  const cut = cutAfterTokens !== undefined && (streamErrorAfterTokens === undefined || cutAfterTokens <= streamErrorAfterTokens);
  const sentCount = Math.min(unitCount, cutAfterTokens ?? Infinity, streamErrorAfterTokens ?? Infinity);
  const malformedAt = behaviour.malformed ? Math.floor(sentCount / 2) : -1;
  const intervalMs = behaviour.tokensPerSecond ? 1000 / behaviour.tokensPerSecond : 0;
  const startedAt = performance.now();

  let pending = frames.opening;
  let pendingTokens = 0;
  let pendingUnits = 0;
  const flush = async (): Promise<boolean> => {
    if (connectionClosed.aborted) {
      return false;
    }
    const text = pending;
    log.countTokensSent(record, pendingTokens);
    pending = '';
    pendingTokens = 0;
    pendingUnits = 0;
    return text === '' || writeRespectingBackPressure(response, text, connectionClosed);
  };

  for (let index = 0; index < sentCount; index++) {
    if (intervalMs > 0) {
      // Tokens are due on a fixed schedule from the start, so timer drift does not slow the pace down.
      const waitMs = startedAt + index * intervalMs - performance.now();
      if (waitMs >= 1 && !((await flush()) && (await pause(waitMs, connectionClosed)))) {
        return;
      }
    }
    if (index === malformedAt) {
      pending += frames.malformed;
    }
    if (index < textCount) {
      pending += frames.renderToken(reply.tokens[index], index);
      // Only text tokens count as sent tokens: a call's frames are not reply text.
      pendingTokens++;
    } else {
      pending += frames.toolCallFrames[index - textCount];
    }
    pendingUnits++;
    if (pendingUnits >= TOKENS_PER_WRITE && !(await flush())) {
      return;
    }
  }
  if (malformedAt === sentCount) {
    pending += frames.malformed;
  }

  if (cut) {
    if (await flush()) {
      closeMidResponse(exchange);
    }
    return;
  }
  if (connectionClosed.aborted) {
    return;
  }
  const errored = streamErrorAfterTokens !== undefined;
  log.countTokensSent(record, pendingTokens);
  pending += errored ? frames.renderInBandError(behaviour.errorMessage ?? 'Emulated stream error') : frames.closing;
  response.end(pending, () => log.settle(record, errored ? 'errored' : 'completed'));
}

/**
 * Ends the connection in the middle of a response, with no HTTP or stream terminator. What was written is
 * flushed first (as when an upstream process dies), so the tokens counted as sent are the ones the client gets.
 */
function closeMidResponse(exchange: ChatExchange): void {
  exchange.log.settle(exchange.record, 'cut');
  // A cut before any byte was written still starts the response: the client sees a 200, then the drop.
  // (headersSent cannot tell: it turns true at writeHead, before anything is written; flushing twice is harmless.)
  exchange.response.flushHeaders();
  const socket = exchange.response.socket;
  if (socket) {
    socket.destroySoon();
  } else {
    exchange.response.destroy();
  }
}

async function writeRespectingBackPressure(response: ServerResponse, text: string, connectionClosed: AbortSignal): Promise<boolean> {
  if (response.write(text)) {
    return true;
  }
  try {
    await once(response, 'drain', { signal: connectionClosed });
    return true;
  } catch {
    return false;
  }
}

/** Waits, or stops early when the connection closes; tells which happened. */
async function pause(milliseconds: number, connectionClosed: AbortSignal): Promise<boolean> {
  try {
    await sleep(milliseconds, undefined, { signal: connectionClosed });
    return true;
  } catch {
    return false;
  }
}
