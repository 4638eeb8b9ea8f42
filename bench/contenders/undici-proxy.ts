/**
 * The physical floor of a Node gateway on this machine: a reverse proxy that parses nothing. Each request is piped
 * to the upstream with undici and the response piped back, headers and body untouched (hop-by-hop headers aside).
 *
 * `node bench/contenders/undici-proxy.ts --upstream http://127.0.0.1:N` prints `{"url":...}` and runs until SIGTERM.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { Pool, type Dispatcher } from 'undici';
import { readRelayArguments, serveRelay } from './relay-server.ts';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'host']);

const { upstream: upstreamUrl, port } = readRelayArguments();
// Connections enough for scenario 4's thousand concurrent streams: the proxy must never queue.
const upstream = new Pool(upstreamUrl, { connections: 2048, pipelining: 1 });

function forwardableHeaders(headers: IncomingMessage['headers'] | Dispatcher.ResponseData['headers']): Record<string, string | string[]> {
  const forwarded: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) forwarded[name] = value;
  }
  return forwarded;
}

async function proxy(request: IncomingMessage, response: ServerResponse, signal: AbortSignal): Promise<void> {
  const upstreamResponse = await upstream.request({
    path: request.url ?? '/',
    method: request.method === 'POST' ? 'POST' : 'GET',
    headers: forwardableHeaders(request.headers),
    body: request.method === 'POST' ? request : undefined,
    signal,
  });
  response.writeHead(upstreamResponse.statusCode, forwardableHeaders(upstreamResponse.headers));
  await pipeline(upstreamResponse.body, response);
}

serveRelay(port, proxy, () => void upstream.close());
