import type { Response } from 'express';

/**
 * Writes Server-Sent Events as the spec frames them: every event a `data: <json>` line and a blank line.
 * Headers go out with the first event, so a failure before it is still a normal HTTP error. Writes wait for
 * the socket to drain (back-pressure), and fail once the client has gone. Once `signal` is aborted (the turn is
 * stopped), writes no longer wait: the last events are buffered and the stream ends.
 */
export class SseWriter {
  readonly #response: Response;
  readonly #signal: AbortSignal | undefined;
  #started = false;
  #sentFirst = false;

  constructor(response: Response, signal?: AbortSignal) {
    this.#response = response;
    this.#signal = signal;
  }

  /** True once the status and headers were sent. */
  get started(): boolean {
    return this.#started;
  }

  /** Sends the 200 status and the event-stream headers. */
  start(headers: Readonly<Record<string, string>>): void {
    this.#response.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
      ...headers,
    });
    this.#response.flushHeaders();
    this.#started = true;
  }

  /** Sends one event; `[DONE]` is sent as is, anything else as JSON. */
  async send(data: unknown): Promise<void> {
    if (this.#response.destroyed || this.#response.writableEnded) {
      throw new Error('The client closed the stream.');
    }
    const line = `data: ${data === '[DONE]' ? data : JSON.stringify(data)}\n\n`;
    const accepted = this.#response.write(line);
    if (!this.#sentFirst) {
      // Node holds a response's writes until the next tick so that they leave together. When the provider's events
      // arrive in a burst and are handled in one go, that tick comes only after the whole burst: the first event
      // goes out now instead, and the rest are still sent in batches.
      this.#sentFirst = true;
      this.#response.socket?.uncork();
    }
    if (!accepted && !this.#signal?.aborted) {
      await this.#drainedOrClosed();
    }
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
