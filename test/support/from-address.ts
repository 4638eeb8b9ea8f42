/**
 * HTTP requests from a chosen loopback source address. Linux routes all of 127.0.0.0/8 to loopback, so a client
 * bound to 127.0.0.2 and one bound to 127.0.0.3 are two real callers to a server on 127.0.0.1: the server sees
 * their own addresses, with no forwarded header to trust.
 */
import { request } from 'node:http';

/** A response, its body parsed as JSON when it is JSON. */
export interface ResponseFrom {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: unknown;
  readonly milliseconds: number;
}

/** POSTs `body` as JSON to `url` from `localAddress`. */
export function postJsonFrom(url: string, localAddress: string, body: unknown, headers: Record<string, string> = {}): Promise<ResponseFrom> {
  const payload = JSON.stringify(body);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      {
        method: 'POST',
        localAddress,
        agent: false,
        headers: { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(payload)), ...headers },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('error', reject);
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // Not JSON: kept as text.
          }
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: parsed, milliseconds: performance.now() - started });
        });
      },
    );
    outgoing.on('error', reject);
    outgoing.end(payload);
  });
}
