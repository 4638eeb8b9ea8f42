/**
 * The floor of a gateway bound to the official `openai` SDK: a node:http server that parses the request's JSON,
 * calls the upstream through `client.chat.completions.create` (JSON, or the SDK's stream re-sent as SSE) and
 * answers; nothing is authenticated, checked or stored. What it costs above the undici proxy is what the SDK
 * itself costs per call on this machine.
 *
 * `node bench/contenders/sdk-relay.ts --upstream http://127.0.0.1:N` prints `{"url":...}` and runs until SIGTERM.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { json } from 'node:stream/consumers';
import { parseArgs } from 'node:util';
import { OpenAI } from 'openai';

const { values } = parseArgs({ options: { upstream: { type: 'string' }, port: { type: 'string', default: '0' } } });
if (!values.upstream) throw new Error('--upstream is required');
const client = new OpenAI({ apiKey: 'bench', baseURL: `${values.upstream}/v1`, maxRetries: 0, logLevel: 'off' });

async function relay(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const abort = new AbortController();
  response.once('close', () => {
    if (!response.writableFinished) abort.abort();
  });
  try {
    const body = (await json(request)) as OpenAI.ChatCompletionCreateParams;
    if (body.stream) {
      const stream = await client.chat.completions.create({ ...body, stream: true }, { signal: abort.signal });
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      let first = true;
      for await (const chunk of stream) {
        response.write(`data: ${JSON.stringify(chunk)}\n\n`);
        // Node sends a response's writes at the next tick; a burst of upstream events parsed in one go would hold
        // the first one back until the whole burst is done. One turn of the event loop lets it leave now.
        if (first) await new Promise((resolve) => setImmediate(resolve));
        first = false;
      }
      response.end('data: [DONE]\n\n');
      return;
    }
    const completion = await client.chat.completions.create({ ...body, stream: false }, { signal: abort.signal });
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(completion));
  } catch (error) {
    if (!response.headersSent) {
      response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(String(error));
    } else {
      response.destroy();
    }
  }
}

const server = createServer((request, response) => void relay(request, response));
server.keepAliveTimeout = 60_000;
server.listen(Number(values.port), '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
const shutdown = (): void => {
  server.close();
  server.closeAllConnections();
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
