import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Response } from 'express';
import { SseWriter } from './sse-writer.ts';

describe('SseWriter', () => {
  test('frames events as the spec says; a flush hands what was sent to the socket at once, before the rest of a burst', async () => {
    let queuedAfterFirst = -1;
    const server = createServer((_request, response: ServerResponse) => {
      void (async () => {
        // A burst: every event is sent within one run of microtasks, as when the provider's events arrive together
        // and are parsed in one go (ticks run only once the microtasks are done).
        await Promise.resolve();
        const sse = new SseWriter(response as unknown as Response);
        sse.start({ 'X-Conversation-ID': 'c1' });
        await sse.send({ delta: { role: 'assistant' } });
        sse.flush();
        // Bytes still held in the socket's queue, not yet handed to the kernel.
        queuedAfterFirst = response.socket?.writableLength ?? -1;
        await sse.send({ delta: { content: 'Hello' } });
        await sse.send('[DONE]');
        sse.end();
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const response = await fetch(`http://127.0.0.1:${port}/`);
      expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      expect(response.headers.get('x-conversation-id')).toBe('c1');
      expect(await response.text()).toBe('data: {"delta":{"role":"assistant"}}\n\ndata: {"delta":{"content":"Hello"}}\n\ndata: [DONE]\n\n');
      // The headers and the first event left without waiting for the next tick.
      expect(queuedAfterFirst).toBe(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
