/**
 * HTTP on a raw socket, for what `fetch` cannot do: send a request's headers and only the start of its body, and
 * see whether (and how) the server answers while the rest is held back.
 */
import { connect, type Socket } from 'node:net';

/** A request whose body is being held back: the server's answer so far, and the socket to let go of. */
export interface HeldRequest {
  readonly socket: Socket;
  /** The status line's code once the server answered, else undefined. */
  status(): number | undefined;
  /** Everything the server sent so far. */
  received(): string;
  /** Resolves with the status once the server answers, or with undefined after `waitMs`. */
  answered(waitMs: number): Promise<number | undefined>;
}

/** Sends `method path` with `headers` and a `Content-Length` of `contentLength`, then only `start` of the body. */
export async function sendWithBodyHeldBack(baseUrl: string, method: string, path: string, headers: Record<string, string>, contentLength: number, start: string): Promise<HeldRequest> {
  const url = new URL(baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => undefined);
  let text = '';
  const waiting = new Set<() => void>();
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    waiting.forEach((wake) => wake());
  });
  socket.on('close', () => waiting.forEach((wake) => wake()));
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${url.host}`, `Content-Length: ${contentLength}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
  socket.write(`${lines.join('\r\n')}\r\n\r\n${start}`);
  const status = (): number | undefined => {
    const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
    return match ? Number(match[1]) : undefined;
  };
  return {
    socket,
    status,
    received: () => text,
    answered: (waitMs) =>
      new Promise((resolve) => {
        const finish = (): void => {
          const code = status();
          if (code !== undefined || socket.destroyed) {
            clearTimeout(timer);
            waiting.delete(finish);
            resolve(code);
          }
        };
        const timer = setTimeout(() => {
          waiting.delete(finish);
          resolve(status());
        }, waitMs);
        waiting.add(finish);
        finish();
      }),
  };
}
