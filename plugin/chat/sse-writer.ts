import type { Response } from 'express';

/**
 * What a piece of reply text waits for before its frame goes out: the reply journal (reply-journal.ts), which writes
 * the pieces of a turn of the event loop together at its end. `whenWritten` calls back once what it holds is written
 * (with the write's error, if it failed) and returns true, or returns false when nothing waits; `writeWaiting`
 * writes at once (throwing the write's error).
 */
export interface WriteGate {
  whenWritten(then: (error?: unknown) => void): boolean;
  writeWaiting(): void;
}

/**
 * Writes Server-Sent Events as the spec frames them: every event a `data: <json>` line and a blank line.
 * Headers go out with the first event, so a failure before it is still a normal HTTP error. Writes wait for
 * the socket to drain (back-pressure), and fail once the client has gone. Once `signal` is aborted (the turn is
 * stopped), writes no longer wait: the last events are buffered and the stream ends.
 *
 * Node holds a response's writes until the next tick, so the events written in one go (a burst of the provider's
 * events, handled together) leave in one write to the socket; `flush()` sends what is held at once (the first
 * token, with the headers, without waiting for the rest of its burst).
 *
 * With a `gate`, an event that carries reply text (`text` given) is held, with every event sent after it, until the
 * gate says the text is journaled; then they go to the socket together. If the journal's write failed they never
 * go: `released()` and the next send of text give its error. `deliveredText` is the text of the events handed to
 * the socket.
 */
export class SseWriter {
  readonly #response: Response;
  readonly #signal: AbortSignal | undefined;
  readonly #gate: WriteGate | undefined;
  #started = false;
  /** Frames held for the gate (none: empty; a frame is never empty), and the reply text among them. */
  #heldFrames = '';
  #heldText = '';
  #endWhenReleased = false;
  #whenReleased: { readonly promise: Promise<void>; readonly resolve: () => void } | undefined;
  #failure: unknown;
  #deliveredText = '';

  constructor(response: Response, signal?: AbortSignal, gate?: WriteGate) {
    this.#response = response;
    this.#signal = signal;
    this.#gate = gate;
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

  /** The reply text of the events handed to the socket so far (not those still held for the gate). */
  get deliveredText(): string {
    return this.#deliveredText;
  }

  /**
   * Sends one event (with the rest of this tick's, or at `flush()`); `[DONE]` is sent as is, anything else as JSON.
   * `text`: the reply text the event carries (held for the gate). Returns a promise only when the socket is full:
   * then wait for it before sending more (back-pressure).
   */
  send(data: unknown, text = ''): Promise<void> | undefined {
    return this.sendFrame(`data: ${data === '[DONE]' ? data : JSON.stringify(data)}\n\n`, false, text);
  }

  /** Sends one event whose data is JSON text already (a content chunk composed as text: wire-format.ts); as `send`. */
  sendJson(json: string, text = ''): Promise<void> | undefined {
    return this.sendFrame(`data: ${json}\n\n`, false, text);
  }

  /**
   * Sends one event already framed (its lines and the blank line that ends it), with the rest of this tick's, or
   * at once with `flushNow`. For event streams framed otherwise than the spec's `data:` lines (the Responses API's).
   * As `send`: a promise only when the socket is full; throws once the client has gone, and for text once the gate
   * failed (an event without text, such as an in-band error, still goes).
   */
  sendFrame(frame: string, flushNow = false, text = ''): Promise<void> | undefined {
    if (this.#failure !== undefined && text !== '') {
      throw this.#failure;
    }
    if (this.#response.destroyed || this.#response.writableEnded) {
      throw new Error('The client closed the stream.');
    }
    if (this.#holding || (text !== '' && this.#gate?.whenWritten(this.#release))) {
      this.#heldFrames += frame;
      this.#heldText += text;
      if (flushNow) {
        this.flush();
      }
      return this.#response.writableNeedDrain && !this.#signal?.aborted ? this.#drainedOrClosed() : undefined;
    }
    const accepted = this.#response.write(frame);
    this.#deliveredText += text;
    if (flushNow) {
      this.flush();
    }
    return accepted || this.#signal?.aborted ? undefined : this.#drainedOrClosed();
  }

  /** Hands the events sent so far to the socket now, instead of at the end of the tick (held ones: journaled now). */
  flush(): void {
    if (this.#holding) {
      this.#gate?.writeWaiting();
    }
    this.#response.socket?.uncork();
  }

  /**
   * Undefined when no event is held; else resolves once the held events went to the socket (or were dropped: the
   * client left). Rejected with the gate's error once its write failed (those events never went out).
   */
  released(): Promise<void> | undefined {
    if (this.#failure !== undefined) {
      return Promise.reject(this.#failure);
    }
    if (!this.#holding) {
      return undefined;
    }
    if (!this.#whenReleased) {
      let resolve = (): void => undefined;
      const promise = new Promise<void>((done) => {
        resolve = done;
      });
      this.#whenReleased = { promise, resolve };
    }
    return this.#whenReleased.promise.then(() => this.released());
  }

  // The gate's answer: the held events go to the socket together (unless the client left), or never (its write failed).
  readonly #release = (error?: unknown): void => {
    const frames = this.#heldFrames;
    const text = this.#heldText;
    this.#heldFrames = '';
    this.#heldText = '';
    if (error !== undefined) {
      this.#failure = error;
    } else if (!this.#response.destroyed && !this.#response.writableEnded) {
      this.#response.write(frames);
      this.#deliveredText += text;
    }
    if (this.#endWhenReleased && !this.#response.writableEnded) {
      this.#response.end();
    }
    const waiting = this.#whenReleased;
    this.#whenReleased = undefined;
    waiting?.resolve();
  };

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

  get #holding(): boolean {
    return this.#heldFrames !== '';
  }

  /** Ends the stream (after the events held for the gate, if any). */
  end(): void {
    if (this.#holding) {
      this.#endWhenReleased = true;
    } else if (!this.#response.writableEnded) {
      this.#response.end();
    }
  }
}
