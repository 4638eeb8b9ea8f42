/**
 * What the two floor relays (undici-proxy.ts, sdk-relay.ts) share: their command line, a loopback server that
 * answers a relay failure before the first byte with 502 (and cuts the connection after it), the `{"url":...}`
 * line the bench reads, and a stop on SIGTERM or SIGINT.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';

/** `--upstream` (required) and `--port` (default 0) from the command line. */
export function readRelayArguments(): { readonly upstream: string; readonly port: number } {
  const { values } = parseArgs({ options: { upstream: { type: 'string' }, port: { type: 'string', default: '0' } } });
  if (!values.upstream) throw new Error('--upstream is required');
  return { upstream: values.upstream, port: Number(values.port) };
}

/** Serves `relay` on 127.0.0.1:`port`; `onStop` runs after the server stops taking connections. */
export function serveRelay(port: number, relay: (request: IncomingMessage, response: ServerResponse, signal: AbortSignal) => Promise<void>, onStop: () => void = () => undefined): void {
  const server = createServer((request, response) => {
    const abort = new AbortController();
    response.once('close', () => {
      if (!response.writableFinished) abort.abort();
    });
    relay(request, response, abort.signal).catch((error: unknown) => {
      if (!response.headersSent) {
        response.writeHead(502, { 'content-type': 'text/plain' });
        response.end(String(error));
      } else {
        response.destroy();
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1', () => {
    const { port: bound } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${bound}` })}\n`);
  });
  const shutdown = (): void => {
    server.close();
    server.closeAllConnections();
    onStop();
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}
