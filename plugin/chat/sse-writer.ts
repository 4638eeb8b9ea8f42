import type { Response } from 'express';

/**
 * Writes Server-Sent Events as the spec frames them: every event a `data: <json>` line and a blank line.
 * Headers go out with the first event, so a failure before it is still a normal HTTP error. Writes wait for
 * the socket to drain (back-pressure), and fail once the client has gone. Once `signal` is aborted (the turn is
 * stopped), writes no longer wait: the last events are buffered and the stream ends.
 *
 * Node holds a response's writes until the next tick, so the events written in one go (a burst of the provider's
 * events, handled together) leave in one write to the socket; `flush()` sends what is held at once (the first
 * token, with the headers, without waiting for the rest of its burst).
 */
export class SseWriter {
  readonly #response: Response;
  readonly #signal: AbortSignal | undefined;
  #started = false;

  constructor(response: Response, signal?: AbortSignal) {
    this.#response = response;
    this.#signal = signal;
  }

  /** True once the status and headers were set (they leave with the first event). */
  get started(): boolean {
    return this.#started;
  }

  /** Sets the 200 status and the event-stream headers; they are sent with the first event, in the same write. */
  start(headers: Readonly<Record<string, string>>): void {
    this.#response.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
      ...headers,
    });
    this.#started = true;
  }

  /**
   * Sends one event (with the rest of this tick's, or at `flush()`); `[DONE]` is sent as is, anything else as JSON.
   * Returns a promise only when the socket is full: then wait for it before sending more (back-pressure).
   */
  send(data: unknown): Promise<void> | undefined {
    return this.sendFrame(`data: ${data === '[DONE]' ? data : JSON.stringify(data)}\n\n`);
  }

  /** Sends one event whose data is JSON text already (a content chunk composed as text: wire-format.ts); as `send`. */
  sendJson(json: string): Promise<void> | undefined {
    return this.sendFrame(`data: ${json}\n\n`);
  }

  /**
   * Sends one event already framed (its lines and the blank line that ends it), with the rest of this tick's, or
   * at once with `flushNow`. For event streams framed otherwise than the spec's `data:` lines (the Responses API's).
   * As `send`: a promise only when the socket is full; throws once the client has gone.
   */
  sendFrame(frame: string, flushNow = false): Promise<void> | undefined {
    if (this.#response.destroyed || this.#response.writableEnded) {
      throw new Error('The client closed the stream.');
    }
    const accepted = this.#response.write(frame);
    if (flushNow) {
      this.flush();
    }
    return accepted || this.#signal?.aborted ? undefined : this.#drainedOrClosed();
  }

  /** Hands the events sent so far to the socket now, instead of at the end of the tick. */
  flush(): void {
    this.#response.socket?.uncork();
  }

  // Waits for the socket to take more, for the client to leave, or for the turn to be stopped; the listeners go
  // once one fires, so a long stream to a slow client does not pile up listeners.
  #drainedOrClosed(): Promise<void> {
    const response = this.#response;
    const signal = this.#signal;
    return new Promise((resolve) => {
      const settle = (): void => {
        response.off('drain', settle);
        response.off('close', settle);
        signal?.removeEventListener('abort', settle);
        resolve();
      };
      response.on('drain', settle);
      response.on('close', settle);
      signal?.addEventListener('abort', settle);
    });
  }

  /** Ends the stream. */
  end(): void {
    if (!this.#response.writableEnded) {
      this.#response.end();
    }
  }
}
