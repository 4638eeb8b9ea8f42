/**
 * The floor of a gateway bound to the official `openai` SDK: a node:http server that parses the request's JSON,
 * calls the upstream through `client.chat.completions.create` (JSON, or the SDK's stream re-sent as SSE) and
 * answers; nothing is authenticated, checked or stored. What it costs above the undici proxy is what the SDK
 * itself costs per call on this machine.
 *
 * `node bench/contenders/sdk-relay.ts --upstream http://127.0.0.1:N` prints `{"url":...}` and runs until SIGTERM.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { json } from 'node:stream/consumers';
import { OpenAI } from 'openai';
import { readRelayArguments, serveRelay } from './relay-server.ts';

const { upstream, port } = readRelayArguments();
const client = new OpenAI({ apiKey: 'bench', baseURL: `${upstream}/v1`, maxRetries: 0, logLevel: 'off' });

async function relay(request: IncomingMessage, response: ServerResponse, signal: AbortSignal): Promise<void> {
  const body = (await json(request)) as OpenAI.ChatCompletionCreateParams;
  if (!body.stream) {
    const completion = await client.chat.completions.create({ ...body, stream: false }, { signal });
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(completion));
    return;
  }
  const stream = await client.chat.completions.create({ ...body, stream: true }, { signal });
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
}

serveRelay(port, relay);
