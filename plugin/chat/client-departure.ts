/**
 * A client that leaves before its reply ends still costs what the provider generated for it: the provider bills
 * the call, whatever the client read. So the reply records what the call cost (chat-turn.ts), and to know it the
 * call is not cancelled the moment the client leaves: it runs on, unseen, for at most the governance option
 * `usageWaitMs` (1 s by default), long enough for a reply that was nearly done (the usual case for a client that
 * leaves once it has its answer) to end with the provider's own usage; then it is cancelled, and the reply is
 * charged an estimate instead (governance/usage-estimate.ts). Letting a call run on can cost more than cancelling
 * it at once (the tokens generated meanwhile, at most that wait's worth); waiting longer would buy the provider's
 * figure for longer replies at the price of generating them whole.
 */
import type { Response } from 'express';
import type { ChatStreamEvent, ChatUsage } from '../llm/chat-model.ts';

/** Watches a turn's client; once it leaves, the provider call is cancelled after `waitMs` (at once for 0). */
export class ClientDeparture {
  readonly #controller: AbortController;
  readonly #waitMs: number;
  readonly #response: Response;
  #left = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(response: Response, controller: AbortController, waitMs: number) {
    this.#response = response;
    this.#controller = controller;
    this.#waitMs = waitMs;
    response.on('close', this.#onClose);
  }

  /** True once the client left before its answer ended. */
  get left(): boolean {
    return this.#left;
  }

  /** The client is gone (seen by a write that failed, or by the connection's close): the call's deadline starts. */
  leave(): void {
    if (this.#left) {
      return;
    }
    this.#left = true;
    if (this.#waitMs <= 0) {
      this.#controller.abort();
    } else {
      this.#timer = setTimeout(() => this.#controller.abort(), this.#waitMs);
    }
  }

  /** Stops watching the connection; a deadline already running goes on (the call may still be run on). */
  stopWatching(): void {
    this.#response.off('close', this.#onClose);
  }

  /** The turn is over: stops watching, and clears a deadline still running. */
  dispose(): void {
    this.stopWatching();
    clearTimeout(this.#timer);
  }

  readonly #onClose = (): void => {
    if (!this.#response.writableFinished) {
      this.leave();
    }
  };
}

/** What a provider call produced, whether or not its client saw it: for what a reply that did not complete cost. */
export class ProviderOutput {
  /** Characters of text and of calls (names and arguments) generated. */
  characters = 0;
  /** The usage the provider reported, once its `finish` event came. */
  usage: ChatUsage | undefined;

  /** Takes one event of the call's stream into account. */
  observe(event: ChatStreamEvent): void {
    if (event.type === 'text') {
      this.characters += event.text.length;
    } else if (event.type === 'tool_call') {
      this.characters += (event.name?.length ?? 0) + event.arguments.length;
    } else {
      this.usage = event.usage;
    }
  }
}

/**
 * Reads what is left of a stream whose client left, unseen, until the provider ends it (its usage then known) or
 * the departure's deadline cancels it; a failure only ends it. Then the stream is closed.
 */
export async function runOn(upstream: AsyncIterator<ChatStreamEvent>, output: ProviderOutput, departure: ClientDeparture): Promise<void> {
  departure.leave();
  try {
    for (let next = await upstream.next(); !next.done; next = await upstream.next()) {
      output.observe(next.value);
    }
  } catch {
    // Cancelled at the deadline, or failed: what was generated so far is what the estimate counts.
  }
}

/** Closes a provider stream the delivery gives up on (its request is cancelled); never throws. */
export async function closeUpstream(upstream: AsyncIterator<ChatStreamEvent>): Promise<void> {
  try {
    await upstream.return?.();
  } catch {
    // The stream is over either way.
  }
}
