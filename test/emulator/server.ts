// The loopback LLM emulator: a real HTTP server that routes each request to a provider's wire format,
// picks the behaviour that answers it, records it, and hands it to delivery.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAnthropicFormat, renderAnthropicModelList } from './anthropic-format.ts';
import { InvalidBehaviourError, parseBehaviour } from './behaviour.ts';
import type { EmulatorBehaviour } from './behaviour.ts';
import { handleControlRequest } from './control-routes.ts';
import { deliverChat } from './delivery.ts';
import { chooseBehaviour, createEmulatorState, resetState } from './emulator-state.ts';
import type { EmulatorState } from './emulator-state.ts';
import { parseJsonObject, readBody, sendJson } from './http-io.ts';
import { createOllamaFormat, renderOllamaModelList } from './ollama-format.ts';
import { createOpenAiFormat, renderOpenAiModelList } from './openai-format.ts';
import type { ProviderFormat, ProviderName } from './provider-format.ts';
import { credentialFingerprint, redactHeaders } from './recording.ts';
import type { ReceivedRequest, RequestTotals } from './recording.ts';
import { planReply } from './reply-plan.ts';

/** Options of {@link startLlmEmulator}. */
export interface LlmEmulatorOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Defaults to 127.0.0.1: the emulator is for loopback use only. */
  host?: string;
  /** The default behaviour, restored by `reset()`. */
  behaviour?: EmulatorBehaviour;
  /** Model names listed by GET /v1/models and /api/tags (any model name is accepted for chat). */
  models?: string[];
  /** How many request records to keep (oldest dropped first); totals keep counting. Defaults to 10,000. */
  recordLimit?: number;
}

/** A running emulator. */
export interface LlmEmulator {
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  port: number;
  /** Chat requests received, oldest first (the same array for the emulator's lifetime). */
  received: ReceivedRequest[];
  /** Counts of outcomes and tokens sent since the last reset. */
  totals: RequestTotals;
  /** Sets the behaviour of every request that has neither a header override nor a queued behaviour. */
  setBehaviour(behaviour: EmulatorBehaviour): void;
  /** Queues a behaviour for the next chat request only (first in, first out; ahead of the default). */
  enqueue(behaviour: EmulatorBehaviour): void;
  /** Forgets received requests and queued behaviours, restores the startup behaviour, restarts sequence numbers. */
  reset(): void;
  /** Stops listening and drops open connections (hanging requests end as 'aborted'). */
  close(): Promise<void>;
}

/** Per-request override: a JSON behaviour in this header answers that request, ahead of the queue and the default. */
export const BEHAVIOUR_HEADER = 'x-emulator-behaviour';

const FORMATS: Record<ProviderName, ProviderFormat> = {
  openai: createOpenAiFormat('openai'),
  azure: createOpenAiFormat('azure'),
  anthropic: createAnthropicFormat(),
  ollama: createOllamaFormat(),
};
const AZURE_DEPLOYMENT_PATH = /\/deployments\/([^/]+)\/chat\/completions$/;
const DEFAULT_RECORD_LIMIT = 10_000;
const DEFAULT_MODELS = ['llm-emulator'];

/** Starts an emulator listening on loopback; resolves once it accepts connections. */
export async function startLlmEmulator(options: LlmEmulatorOptions = {}): Promise<LlmEmulator> {
  const state = createEmulatorState(
    parseBehaviour(options.behaviour ?? {}),
    options.models ?? DEFAULT_MODELS,
    options.recordLimit ?? DEFAULT_RECORD_LIMIT,
  );
  const server = createServer((request, response) => {
    routeRequest(state, request, response).catch((error: unknown) => failRequest(response, error));
  });
  const host = options.host ?? '127.0.0.1';
  const port = await listen(server, options.port ?? 0, host);
  let closing: Promise<void> | undefined;

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    received: state.log.received,
    totals: state.log.totals,
    setBehaviour: (behaviour) => {
      state.defaultBehaviour = parseBehaviour(behaviour);
    },
    enqueue: (behaviour) => {
      state.queue.push(parseBehaviour(behaviour));
    },
    reset: () => resetState(state),
    close: () => (closing ??= closeServer(server, state.openResponses)),
  };
}

// Routes match on the end of the path, so any base URL prefix works ("OpenAI-compatible" servers,
// Azure's /openai/deployments/{deployment}, proxies that mount a provider under a path).
async function routeRequest(state: EmulatorState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const target = request.url ?? '/';
  const queryStart = target.indexOf('?');
  const pathname = queryStart === -1 ? target : target.slice(0, queryStart);
  const method = request.method;

  if (pathname.startsWith('/_emulator/')) {
    await handleControlRequest(state, request, response, pathname);
  } else if (method === 'POST' && pathname.endsWith('/chat/completions')) {
    const deployment = AZURE_DEPLOYMENT_PATH.exec(pathname)?.[1];
    if (deployment === undefined) {
      await handleChat(state, 'openai', request, response, undefined);
    } else if (queryStart === -1 || !new URLSearchParams(target.slice(queryStart + 1)).has('api-version')) {
      // Azure answers a request without api-version with a bare 404; the message says what is missing.
      rejectRequest(request, response, 'azure', 404, 'Resource not found: the api-version query parameter is missing');
    } else {
      await handleChat(state, 'azure', request, response, decodeURIComponent(deployment));
    }
  } else if (method === 'POST' && pathname.endsWith('/v1/messages')) {
    await handleChat(state, 'anthropic', request, response, undefined);
  } else if (method === 'POST' && pathname.endsWith('/api/chat')) {
    await handleChat(state, 'ollama', request, response, undefined);
  } else if (method === 'GET' && pathname.endsWith('/api/tags')) {
    sendJson(response, 200, {}, renderOllamaModelList(state.models));
  } else if (method === 'GET' && pathname.endsWith('/models')) {
    // OpenAI and Anthropic share the path; only Anthropic's clients send anthropic-version.
    const anthropic = request.headers['anthropic-version'] !== undefined;
    sendJson(response, 200, {}, anthropic ? renderAnthropicModelList(state.models) : renderOpenAiModelList(state.models));
  } else {
    rejectRequest(request, response, 'openai', 404, `The emulator has no route for ${method} ${pathname}`);
  }
}

async function handleChat(
  state: EmulatorState,
  provider: ProviderName,
  request: IncomingMessage,
  response: ServerResponse,
  pathModel: string | undefined,
): Promise<void> {
  const format = FORMATS[provider];
  const body = parseJsonObject(await readBody(request));
  if (body === undefined) {
    rejectRequest(request, response, provider, 400, 'The request body is not a JSON object');
    return;
  }
  const chatRequest = format.readChatRequest(body, pathModel);
  if (typeof chatRequest === 'string') {
    rejectRequest(request, response, provider, 400, chatRequest);
    return;
  }
  let behaviour: EmulatorBehaviour;
  try {
    const lastUser = chatRequest.messages.findLast((message) => message.role === 'user')?.content;
    behaviour = chooseBehaviour(state, request.headers[BEHAVIOUR_HEADER], lastUser ?? '');
  } catch (error) {
    if (!(error instanceof InvalidBehaviourError)) {
      throw error;
    }
    const source = request.headers[BEHAVIOUR_HEADER] === undefined ? '[emulator-behaviour] in the message' : `${BEHAVIOUR_HEADER} header`;
    rejectRequest(request, response, provider, 400, `Invalid ${source}: ${error.message}`);
    return;
  }

  const sequence = state.nextSequence++;
  const record: ReceivedRequest = {
    sequence,
    provider,
    path: request.url ?? '',
    model: chatRequest.model,
    stream: chatRequest.stream,
    messages: chatRequest.messages,
    tools: chatRequest.tools,
    ...(chatRequest.toolChoice === undefined ? {} : { toolChoice: chatRequest.toolChoice }),
    output: chatRequest.output,
    body,
    headers: redactHeaders(request.headers),
    credentialFingerprint: credentialFingerprint(request.headers),
    receivedAt: Date.now(),
    behaviour,
    outcome: 'pending',
    tokensSent: 0,
  };
  state.log.add(record);

  // Whoever closes the connection, this settles the outcome (a no-op once completed or cut) and stops
  // every wait in delivery, which is how a client that goes away ends a hang, a pause or a stream.
  const connection = new AbortController();
  state.openResponses.add(response);
  response.once('close', () => {
    state.openResponses.delete(response);
    state.log.settle(record, 'aborted');
    connection.abort();
  });
  if (request.socket.destroyed) {
    // The client left while its body was being read, before the close listener was attached.
    state.openResponses.delete(response);
    state.log.settle(record, 'aborted');
    return;
  }
  await deliverChat({
    response,
    format,
    request: chatRequest,
    reply: planReply(chatRequest, behaviour, sequence),
    behaviour,
    record,
    log: state.log,
    connectionClosed: connection.signal,
  });
}

/** Answers a request the emulator will not serve, in the provider's error shape; it is not recorded. */
function rejectRequest(
  request: IncomingMessage,
  response: ServerResponse,
  provider: ProviderName,
  status: number,
  message: string,
): void {
  request.resume();
  sendJson(response, status, {}, FORMATS[provider].renderError(status, message));
}

// A bug in the emulator must not look like an emulated failure: it answers 500 with the error in the body.
function failRequest(response: ServerResponse, error: unknown): void {
  if (response.destroyed) {
    return;
  }
  if (response.headersSent) {
    response.destroy();
    return;
  }
  const message = error instanceof Error ? error.message : String(error);
  sendJson(response, 500, {}, JSON.stringify({ error: { message: `LLM emulator failure: ${message}`, type: 'emulator_error' } }));
}

async function listen(server: Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as AddressInfo).port;
}

async function closeServer(server: Server, openResponses: ReadonlySet<ServerResponse>): Promise<void> {
  const closed = new Promise<void>((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
  });
  // The server can report itself closed before every response has seen its socket go; waiting for each one
  // means a caller reading `received` after close() sees hanging requests already settled as 'aborted'.
  const responsesClosed = [...openResponses].map((response) => once(response, 'close'));
  server.closeAllConnections();
  await Promise.all([closed, ...responsesClosed]);
}
