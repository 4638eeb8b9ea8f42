import type { Response } from 'express';
import { SseWriter } from '../chat/sse-writer.ts';

/**
 * Writes the Responses API's event stream: each event an `event: <type>` line and a `data: <json>` line, numbered
 * in order (`sequence_number` from 0), as OpenAI sends them; no `[DONE]`. Headers go out with the first event, so
 * a failure before it is still a normal HTTP error. Writes wait for the socket to drain (back-pressure) and fail
 * once the client has gone; once `signal` is aborted (the turn is stopped) they no longer wait. Events numbered up
 * to `startingAfter` are counted but not sent (a stored response streamed again from a point).
 */
export class ResponseEventWriter {
  readonly #response: Response;
  readonly #sse: SseWriter;
  readonly #startingAfter: number;
  #sequence = 0;

  constructor(response: Response, signal?: AbortSignal, startingAfter = -1) {
    this.#response = response;
    this.#sse = new SseWriter(response, signal);
    this.#startingAfter = startingAfter;
  }

  /** True once the status and headers were sent. */
  get started(): boolean {
    return this.#sse.started;
  }

  /** Sends the 200 status and the event-stream headers now. */
  start(headers: Readonly<Record<string, string>>): void {
    this.#sse.start(headers);
    this.#response.flushHeaders();
  }

  /** Sends one event, numbered; the first one sent leaves at once rather than with the burst that may follow it. */
  async send(event: { readonly type: string } & Record<string, unknown>): Promise<void> {
    const sequence = this.#sequence++;
    if (sequence <= this.#startingAfter) {
      if (this.#response.destroyed || this.#response.writableEnded) {
        throw new Error('The client closed the stream.');
      }
      return;
    }
    const frame = `event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: sequence })}\n\n`;
    await this.#sse.sendFrame(frame, sequence === this.#startingAfter + 1);
  }

  /** Ends the stream. */
  end(): void {
    this.#sse.end();
  }
}
