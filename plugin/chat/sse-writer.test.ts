import { mkdtempSync, rmSync, writeSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Response } from 'express';
import { ReplyJournal } from './reply-journal.ts';
import { SseWriter, type WriteGate } from './sse-writer.ts';

/** Serves one request with `handle`, and returns the body the client read (or what it read before the stream broke). */
async function serveOnce(handle: (response: ServerResponse) => Promise<void>): Promise<string> {
  const server = createServer((_request, response) => {
    void handle(response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/`);
    return await response.text();
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** A gate opened by hand: it holds text until `open()` (or `fail()`), as the journal does until its write returns. */
function handGate(): WriteGate & { open(): void; fail(error: Error): void; writesNow: number } {
  let waiting: ((error?: unknown) => void)[] = [];
  const gate = {
    writesNow: 0,
    whenWritten: (then: (error?: unknown) => void): boolean => {
      waiting.push(then);
      return true;
    },
    writeWaiting: (): void => {
      gate.writesNow++;
      gate.open();
    },
    open: (): void => {
      const told = waiting;
      waiting = [];
      for (const then of told) then();
    },
    fail: (error: Error): void => {
      const told = waiting;
      waiting = [];
      for (const then of told) then(error);
    },
  };
  return gate;
}

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

  test('text waits for the gate, and what is sent after it waits behind it; they go out together, in order', async () => {
    const seen: { held?: string; released?: string; promise?: boolean } = {};
    const body = await serveOnce(async (response) => {
      const gate = handGate();
      const sse = new SseWriter(response as unknown as Response, undefined, gate);
      sse.start({});
      sse.send({ delta: { role: 'assistant' } });
      sse.sendJson('{"delta":{"content":"Hello"}}', 'Hello');
      sse.send({ delta: { tool_calls: [] } });
      seen.held = sse.deliveredText;
      const released = sse.released();
      seen.promise = released instanceof Promise;
      gate.open();
      await released;
      seen.released = sse.deliveredText;
      sse.sendJson('{"delta":{"content":"!"}}', '!');
      gate.open();
      sse.send('[DONE]');
      sse.end();
    });
    expect(body).toBe(
      'data: {"delta":{"role":"assistant"}}\n\ndata: {"delta":{"content":"Hello"}}\n\ndata: {"delta":{"tool_calls":[]}}\n\ndata: {"delta":{"content":"!"}}\n\ndata: [DONE]\n\n',
    );
    expect(seen).toEqual({ held: '', released: 'Hello', promise: true });
  });

  test('flush writes what the gate holds at once, so the first token need not wait for the end of the loop turn', async () => {
    let writesNow = 0;
    let heldAfterFlush: unknown = 'not run';
    const body = await serveOnce(async (response) => {
      const gate = handGate();
      const sse = new SseWriter(response as unknown as Response, undefined, gate);
      sse.start({});
      sse.sendJson('{"delta":{"content":"Hi"}}', 'Hi');
      sse.flush();
      writesNow = gate.writesNow;
      heldAfterFlush = sse.released();
      sse.end();
    });
    expect(writesNow).toBe(1);
    expect(heldAfterFlush).toBeUndefined();
    expect(body).toBe('data: {"delta":{"content":"Hi"}}\n\n');
  });

  test("when the gate's write fails the held events never go out; the failure is thrown; an event without text still goes", async () => {
    const seen: { text?: string; released?: string; next?: string } = {};
    const body = await serveOnce(async (response) => {
      const gate = handGate();
      const sse = new SseWriter(response as unknown as Response, undefined, gate);
      sse.start({});
      sse.sendJson('{"delta":{"content":"Hel"}}', 'Hel');
      sse.send({ delta: { tool_calls: [] } });
      gate.fail(new Error('ENOSPC'));
      seen.released = await sse.released()?.then(() => 'resolved', (error: Error) => error.message);
      try {
        sse.sendJson('{"delta":{"content":"lo"}}', 'lo');
      } catch (error) {
        seen.next = (error as Error).message;
      }
      seen.text = sse.deliveredText;
      sse.send({ error: { type: 'server_error' } });
      sse.end();
    });
    expect(seen).toEqual({ released: 'ENOSPC', next: 'ENOSPC', text: '' });
    expect(body).toBe('data: {"error":{"type":"server_error"}}\n\n');
  });

  test('the reply journal as the gate: held text goes out once its line is in the file; a piece whose write failed never does', async () => {
    const root = mkdtempSync(join(tmpdir(), 'fhirgate-sse-journal-'));
    let failing = false;
    const journal = ReplyJournal.open(root, {
      writeLines: (fd, text) => {
        if (failing) throw new Error('ENOSPC: no space left on device, write');
        return writeSync(fd, text);
      },
    });
    const turn = { projectId: 'p', parties: { categorySystem: 'urn:test', caller: { reference: 'Practitioner/dr' }, agent: { reference: 'Device/agent' } } };
    journal.open({ ...turn, reply: { id: 'r1', rootId: 'root', promptId: 'p1', modelId: 'openai/gpt-4o-mini', history: { count: 0 } } });
    let outcome = '';
    try {
      const body = await serveOnce(async (response) => {
        const sse = new SseWriter(response as unknown as Response, undefined, journal);
        sse.start({});
        journal.delivered('r1', 'kept ');
        sse.sendJson('{"delta":{"content":"kept "}}', 'kept ');
        await sse.released();
        failing = true;
        journal.delivered('r1', 'lost');
        sse.sendJson('{"delta":{"content":"lost"}}', 'lost');
        outcome = await sse.released()!.then(() => 'sent', (error: Error) => `${error.message} after "${sse.deliveredText}"`);
        sse.end();
      });
      expect(body).toBe('data: {"delta":{"content":"kept "}}\n\n');
      expect(outcome).toBe('ENOSPC: no space left on device, write after "kept "');
    } finally {
      failing = false;
      journal.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
