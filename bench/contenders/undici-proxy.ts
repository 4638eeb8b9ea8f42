/**
 * The physical floor of a Node gateway on this machine: a reverse proxy that parses nothing. Each request is piped
 * to the upstream with undici and the response piped back, headers and body untouched (hop-by-hop headers aside).
 *
 * `node bench/contenders/undici-proxy.ts --upstream http://127.0.0.1:N` prints `{"url":...}` and runs until SIGTERM.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { Pool, type Dispatcher } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'host']);

const { values } = parseArgs({ options: { upstream: { type: 'string' }, port: { type: 'string', default: '0' } } });
if (!values.upstream) throw new Error('--upstream is required');
// Connections enough for scenario 4's thousand concurrent streams: the proxy must never queue.
const upstream = new Pool(values.upstream, { connections: 2048, pipelining: 1 });

function forwardableHeaders(headers: IncomingMessage['headers'] | Dispatcher.ResponseData['headers']): Record<string, string | string[]> {
  const forwarded: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) forwarded[name] = value;
  }
  return forwarded;
}

async function proxy(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const abort = new AbortController();
  response.once('close', () => {
    if (!response.writableFinished) abort.abort();
  });
  try {
    const upstreamResponse = await upstream.request({
      path: request.url ?? '/',
      method: request.method === 'POST' ? 'POST' : 'GET',
      headers: forwardableHeaders(request.headers),
      body: request.method === 'POST' ? request : undefined,
      signal: abort.signal,
    });
    response.writeHead(upstreamResponse.statusCode, forwardableHeaders(upstreamResponse.headers));
    await pipeline(upstreamResponse.body, response);
  } catch (error) {
    if (!response.headersSent) {
      response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(String(error));
    } else {
      response.destroy();
    }
  }
}

const server = createServer((request, response) => void proxy(request, response));
server.keepAliveTimeout = 60_000;
server.listen(Number(values.port), '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
const shutdown = (): void => {
  server.close();
  server.closeAllConnections();
  void upstream.close();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
