import type { Response } from 'express';

/**
 * Writes the Responses API's event stream: each event an `event: <type>` line and a `data: <json>` line, numbered
 * in order (`sequence_number` from 0), as OpenAI sends them; no `[DONE]`. Headers go out with the first event, so
 * a failure before it is still a normal HTTP error. Writes wait for the socket to drain (back-pressure) and fail
 * once the client has gone; once `signal` is aborted (the turn is stopped) they no longer wait. Events numbered up
 * to `startingAfter` are counted but not sent (a stored response streamed again from a point).
 */
export class ResponseEventWriter {
  readonly #response: Response;
  readonly #signal: AbortSignal | undefined;
  readonly #startingAfter: number;
  #sequence = 0;
  #started = false;

  constructor(response: Response, signal?: AbortSignal, startingAfter = -1) {
    this.#response = response;
    this.#signal = signal;
    this.#startingAfter = startingAfter;
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

  /** Sends one event, numbered. */
  async send(event: { readonly type: string } & Record<string, unknown>): Promise<void> {
    if (this.#response.destroyed || this.#response.writableEnded) {
      throw new Error('The client closed the stream.');
    }
    const sequence = this.#sequence++;
    if (sequence <= this.#startingAfter) {
      return;
    }
    const accepted = this.#response.write(`event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: sequence })}\n\n`);
    if (sequence === 0 || sequence === this.#startingAfter + 1) {
      // The first event goes out now rather than with the burst that may follow it in the same tick.
      this.#response.socket?.uncork();
    }
    if (!accepted && !this.#signal?.aborted) {
      await drainedOrClosed(this.#response, this.#signal);
    }
  }

  /** Ends the stream. */
  end(): void {
    if (!this.#response.writableEnded) {
      this.#response.end();
    }
  }
}

/** Waits for the socket to take more, for the client to leave, or for the turn to be stopped. */
function drainedOrClosed(response: Response, signal: AbortSignal | undefined): Promise<void> {
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
