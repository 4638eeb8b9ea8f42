/**
 * A reverse proxy on loopback for the device networks cases, doing what a ward's reverse proxy or a load balancer
 * does: it takes a request on 127.0.0.1, appends its caller's address to `X-Forwarded-For` (after whatever the caller
 * sent, which it does not vouch for), and passes the request on to the target from its own source address, so the
 * target can tell it from any other caller on loopback. Bodies stream through both ways.
 */
import { createServer, request, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

/** A running proxy. */
export interface LoopbackProxy {
  /** Base URL with a trailing slash: the target's paths, through the proxy. */
  readonly url: string;
  close(): Promise<void>;
}

/** Headers a proxy does not pass on (RFC 9110 §7.6.1), besides `X-Forwarded-For`, which it rewrites. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'x-forwarded-for']);

/** Starts a proxy to `targetUrl` (an http URL) that connects to the target from `sourceAddress`. */
export async function startLoopbackProxy(targetUrl: string, sourceAddress: string): Promise<LoopbackProxy> {
  const target = new URL(targetUrl);
  const server = createServer((incoming, outgoing) => {
    const forwarded = request(
      {
        host: target.hostname,
        port: target.port,
        method: incoming.method,
        path: incoming.url,
        localAddress: sourceAddress,
        agent: false,
        headers: forwardedHeaders(incoming, target.host),
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      }
    );
    forwarded.on('error', () => {
      if (!outgoing.headersSent) {
        outgoing.writeHead(502, { 'Content-Type': 'text/plain' }).end('The proxy could not reach the target.');
      } else {
        outgoing.destroy();
      }
    });
    incoming.pipe(forwarded);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function forwardedHeaders(incoming: IncomingMessage, targetHost: string): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming.headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) {
      headers[name] = value;
    }
  }
  const caller = (incoming.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
  const claimed = incoming.headers['x-forwarded-for'];
  const earlier = Array.isArray(claimed) ? claimed.join(', ') : claimed;
  headers['x-forwarded-for'] = earlier ? `${earlier}, ${caller}` : caller;
  headers.host = targetHost;
  return headers;
}
