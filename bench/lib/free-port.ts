/** A loopback port free right now, for servers that cannot be told to pick one (port 0) and report it. */
import { createServer, type AddressInfo } from 'node:net';

export async function findFreePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Polls `url` until it answers 2xx; throws with `describeFailure()` when `isGone()` or after the timeout. */
export async function waitUntilAnswering(url: string, timeoutMs: number, isGone: () => boolean, describeFailure: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (isGone()) throw new Error(`exited before ${url} answered: ${describeFailure()}`);
    const ready = await fetch(url).then((response) => response.ok, () => false);
    if (ready) return;
    if (Date.now() > deadline) throw new Error(`${url} did not answer within ${timeoutMs} ms: ${describeFailure()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
