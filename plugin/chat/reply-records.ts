/**
 * Step 6's guarantee: every accepted turn ends with exactly one reply record, whatever the store does.
 * - A write the store refuses for a passing reason (a 5xx, a lost connection) is retried with backoff, briefly,
 *   while the client waits.
 * - A reply that still cannot be written, or that the store refuses outright, goes to the journal's outbox (on
 *   disk, fsync'd) and the client is answered as usual; a background drain writes it, backing off up to half a
 *   minute between rounds, until the store takes it.
 * Every reply is written as the project's AI agent (agent-device.ts), so its `meta.author` marks it as fhirgate's.
 * - At start-up, the turns an earlier process left unfinished (killed mid-stream) are recorded: their outbox reply
 *   if they had one, otherwise a `stopped` reply with the text that process had delivered, charged an estimate of
 *   what the call cost where the journal knows the prompt (its `charge`: governance/usage-estimate.ts). Either is
 *   then counted against the budgets (`onRecovered`), once.
 * - With a turn registry (turn-registry.ts, in the Redis instances share), the turns of an instance lost for good
 *   are taken over by a live instance and recorded the same way, within the registry's bound.
 * A reply recorded after its turn's process stopped is placed right after its prompt (`sent`), in the
 * conversation's order, whenever it is written.
 * Every write names the reply's id (assigned before the provider is called), and the drain reads before it writes,
 * so a retry never makes a second record.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { outcomeStatusOf } from '../medplum-errors.ts';
import type { HostLogger } from '../host.ts';
import { costOf } from '../governance/model-prices.ts';
import { estimatedUsage } from '../governance/usage-estimate.ts';
import { buildReply, type FhirToolRecord } from './communication-builders.ts';
import { findCommunication } from './conversation.ts';
import type { AfterWrite, OpenTurn, ReplyJournal, UnfinishedTurn } from './reply-journal.ts';
import type { TurnRegistry } from './turn-registry.ts';

/** The reason recorded on a reply whose process stopped before it finished. */
export const RECOVERED_REASON = 'The server stopped before the reply finished; recorded at the next start with the text delivered.';
/** The reason recorded on a reply whose instance was lost, recorded by another instance. */
export const LOST_INSTANCE_REASON =
  'The server instance running the reply was lost before it finished; recorded by another instance with the text delivered as far as it was shared.';

/** How writes are retried. */
export interface ReplyRecordsOptions {
  readonly journal: ReplyJournal;
  /** Writes replies: a repository authored as the project's AI agent (AgentDevices.repoFor). */
  readonly agentRepo: (projectId: string) => Promise<FhirRepository>;
  /** Told of each reply the store took, as the store returned it (so its author is known without reading it back). */
  readonly onStored?: (projectId: string, stored: WithId<Communication>) => Promise<void>;
  /**
   * Told of each reply of a stopped process this one wrote, for the budgets: `counted` when that process had counted
   * it already (a reply the store had refused, from its outbox).
   */
  readonly onRecovered?: (projectId: string, reply: Communication & { id: string }, counted: boolean) => void;
  /** Reads whether a prompt or reply is on record, whoever wrote it. */
  readonly systemRepo: (projectId: string) => Promise<FhirRepository>;
  /** The turns of every instance, shared through Redis; absent without Redis (the journal alone recovers). */
  readonly registry?: TurnRegistry;
  readonly logger?: HostLogger;
  /** Waits between the tries of a write while the client waits (default 25, 100, 400 ms: four tries). */
  readonly retryDelaysMs?: readonly number[];
  /** First wait of the background drain; doubles after each failed round up to `maxDrainDelayMs`. */
  readonly drainDelayMs?: number;
  readonly maxDrainDelayMs?: number;
}

interface OutboxEntry {
  readonly projectId: string;
  readonly resource: Communication & { id: string };
  /** Recovered turns: write only if this prompt is on record (the process may have died before writing it). */
  readonly promptId?: string;
  /** A reply of a process that stopped: `outbox` when that process had built (and counted) it, `stopped` when not. */
  readonly recovered?: 'outbox' | 'stopped';
}

/** The reply records of one plugin. */
export class ReplyRecords {
  readonly #options: ReplyRecordsOptions;
  readonly #outbox = new Map<string, OutboxEntry>();
  #timer: NodeJS.Timeout | undefined;
  #sweeper: NodeJS.Timeout | undefined;
  #delayMs: number;
  #draining: Promise<void> | undefined;
  #closing = false;

  constructor(options: ReplyRecordsOptions) {
    this.#options = options;
    this.#delayMs = options.drainDelayMs ?? 1_000;
    this.#adopt(options.journal.unfinished, RECOVERED_REASON);
    // Journals adopted later (their writer's lease expired while this process ran: journal-lease.ts).
    options.journal.onAdopted((turns) => void this.#recordAdopted(turns));
    const registry = options.registry;
    if (registry) {
      this.#sweeper = setInterval(() => void this.sweep(), registry.sweepMs);
      this.#sweeper.unref();
    }
  }

  /** Takes over the turns of instances lost for good and records them; resolves how many it took. */
  async sweep(): Promise<number> {
    const claimed = (await this.#options.registry?.claimLost()) ?? [];
    if (claimed.length > 0) {
      this.#adopt(claimed, LOST_INSTANCE_REASON);
      this.#options.logger?.info('fhirgate took over the unfinished replies of a lost instance', { replies: claimed.length });
      await this.#drainOnce();
      if (this.#outbox.size > 0) {
        this.#schedule();
      }
    }
    return claimed.length;
  }

  async #recordAdopted(turns: readonly UnfinishedTurn[]): Promise<void> {
    if (this.#closing) {
      return;
    }
    this.#adopt(turns, RECOVERED_REASON);
    this.#options.logger?.info('fhirgate took over the reply journal of a stopped instance', { replies: turns.length });
    await this.#drainOnce();
    if (this.#outbox.size > 0) {
      this.#schedule();
    }
  }

  /** Unfinished turns of a process that stopped: their outbox reply if they had one, else a `stopped` one. */
  #adopt(turns: readonly UnfinishedTurn[], reason: string): void {
    for (const turn of turns) {
      const entry: OutboxEntry = turn.outbox
        ? { projectId: turn.projectId, resource: { ...turn.outbox, id: turn.reply.id }, recovered: 'outbox' }
        : { projectId: turn.projectId, resource: stoppedReply(turn, reason), promptId: turn.reply.promptId, recovered: 'stopped' };
      this.#outbox.set(turn.reply.id, entry);
    }
  }

  /** Replies waiting in the outbox (this process's, and those recovered at start-up). */
  get pending(): number {
    return this.#outbox.size;
  }

  /** Records what an earlier process left unfinished; resolves when the store took all of it, or the first round failed. */
  async recover(): Promise<{ readonly recovered: number; readonly pending: number }> {
    const before = this.#outbox.size;
    if (before === 0) {
      return { recovered: 0, pending: 0 };
    }
    await this.#drainOnce();
    this.#options.logger?.info('fhirgate recovered unfinished replies', { recovered: before - this.#outbox.size, pending: this.#outbox.size });
    return { recovered: before - this.#outbox.size, pending: this.#outbox.size };
  }

  /** True while a turn with this reply id runs in this process. */
  isOpen(replyId: string): boolean {
    return this.#options.journal.isOpen(replyId);
  }

  /** A turn is about to write its prompt (with the ids in `turn`). */
  open(turn: OpenTurn): void {
    this.#options.journal.open(turn);
    this.#options.registry?.open(turn);
  }

  /** The history (and patient context) the model is sent, for the reply's record. */
  history(replyId: string, history: OpenTurn['reply']['history'], patientContext?: OpenTurn['reply']['patientContext']): void {
    this.#options.journal.history(replyId, history, patientContext);
    this.#options.registry?.history(replyId, history, patientContext);
  }

  /** A FHIR tool call ran for the model, and its result is about to be given to it (for the reply's record). */
  toolCall(replyId: string, call: FhirToolRecord): void {
    this.#options.journal.toolCall(replyId, call);
    this.#options.registry?.toolCall(replyId, call);
  }

  /** The turn's prompt was not stored: the turn was refused and needs no reply. */
  abandon(replyId: string): void {
    this.#closed(replyId);
  }

  /** Reply text is about to go to the client: hold its frame until `whenWritten` says the journal has it. */
  delivered(replyId: string, text: string): void {
    this.#options.journal.delivered(replyId, text);
    this.#options.registry?.delivered(replyId, text);
  }

  /** See `ReplyJournal.whenWritten`: the gate a stream's writer holds text frames at (sse-writer.ts). */
  whenWritten(then: AfterWrite): boolean {
    return this.#options.journal.whenWritten(then);
  }

  /** See `ReplyJournal.writeWaiting`. */
  writeWaiting(): void {
    this.#options.journal.writeWaiting();
  }

  /**
   * Writes the reply as the project's AI agent, retrying passing failures; if the store still does not take it,
   * keeps it in the outbox. Resolves `stored` or `outbox`; rejects only when not even the journal can keep it.
   */
  async record(projectId: string, resource: Communication & { id: string }): Promise<'stored' | 'outbox'> {
    let stored: WithId<Communication>;
    try {
      stored = await withRetries(async () => (await this.#options.agentRepo(projectId)).createResource(resource, { assignedId: true }), this.#options.retryDelaysMs);
    } catch (error) {
      this.#options.journal.outbox(resource.id, resource);
      this.#options.registry?.outbox(resource.id, resource);
      this.#outbox.set(resource.id, { projectId, resource });
      this.#options.logger?.warn('fhirgate kept a reply in the outbox: the store did not take it', {
        replyId: resource.id,
        status: outcomeStatusOf(error),
      });
      this.#schedule();
      return 'outbox';
    }
    this.#closed(resource.id);
    // Only a shortcut for later reads: the reply is on record whatever happens here.
    await this.#options.onStored?.(projectId, stored).catch(() => undefined);
    return 'stored';
  }

  /** Stops the background drain after one last round; what is still pending stays in the journal for the next start. */
  async close(): Promise<void> {
    this.#closing = true;
    clearTimeout(this.#timer);
    clearInterval(this.#sweeper);
    await this.#draining;
    if (this.#outbox.size > 0) {
      await this.#drainOnce();
    }
  }

  /** Nothing is left to do for the turn: its reply is on record, or it needs none. */
  #closed(replyId: string): void {
    this.#options.journal.closed(replyId);
    this.#options.registry?.closed(replyId);
  }

  #schedule(): void {
    if (this.#timer || this.#closing) {
      return;
    }
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#drainOnce().then(() => {
        if (this.#outbox.size > 0) {
          this.#delayMs = Math.min(this.#delayMs * 2, this.#options.maxDrainDelayMs ?? 30_000);
          this.#schedule();
        } else {
          this.#delayMs = this.#options.drainDelayMs ?? 1_000;
        }
      });
    }, this.#delayMs);
    this.#timer.unref();
  }

  #drainOnce(): Promise<void> {
    this.#draining ??= this.#drain().finally(() => {
      this.#draining = undefined;
    });
    return this.#draining;
  }

  async #drain(): Promise<void> {
    for (const [id, entry] of [...this.#outbox]) {
      try {
        const system = await this.#options.systemRepo(entry.projectId);
        const promptStored = entry.promptId === undefined || (await communicationExists(system, entry.promptId));
        if (promptStored && !(await communicationExists(system, id))) {
          await (await this.#options.agentRepo(entry.projectId)).createResource(entry.resource, { assignedId: true });
          if (entry.recovered) {
            this.#options.onRecovered?.(entry.projectId, entry.resource, entry.recovered === 'outbox');
          }
        }
        this.#outbox.delete(id);
        this.#closed(id);
      } catch (error) {
        this.#options.logger?.warn('fhirgate could not write a reply from the outbox yet', { replyId: id, status: outcomeStatusOf(error) });
        if (this.#outbox.size > 0) {
          this.#schedule();
        }
        return;
      }
    }
  }
}

/** Runs `write`, retrying after each delay while the failure is a passing one (not a 4xx refusal). */
export async function withRetries<T>(write: () => Promise<T>, delaysMs: readonly number[] = [25, 100, 400]): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (attempt >= delaysMs.length || !isPassingFailure(error)) {
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, delaysMs[attempt]));
    }
  }
}

/**
 * A write the turn cannot go on without (the prompt, the project's AI agent Device): retried like any write, and
 * if the store still fails, the request is refused with 503 `unavailable` and Retry-After, nothing stored by it.
 */
export async function requireStored<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await withRetries(write);
  } catch (error) {
    if (isPassingFailure(error)) {
      throw new AppError('unavailable', 'The FHIR store is not taking writes right now; nothing was stored. Retry shortly.', {
        cause: error,
        isRetryable: true,
        retryAfterSeconds: 1,
      });
    }
    throw error;
  }
}

/** A store failure that may pass: anything but a FHIR outcome in the 4xx range (those are refusals). */
export function isPassingFailure(error: unknown): boolean {
  const status = outcomeStatusOf(error);
  // A 429 (Medplum's FHIR quota) is a refusal here: quick retries would only spend more of the quota. The prompt's
  // caller gets it with Retry-After; a reply goes to the outbox, which the system repository drains.
  return status === undefined || status >= 500;
}


/** Whether the repository holds (and shows the caller) the Communication `id`. */
export async function communicationExists(repo: FhirRepository, id: string): Promise<boolean> {
  return (await findCommunication(repo, id)) !== undefined;
}

/**
 * The `stopped` reply of a turn whose process stopped: the text its client was sent, and, where the journal knows
 * the prompt, an estimate of what the call cost (its prompt and the text sent; the provider's figure died with it).
 */
function stoppedReply(turn: UnfinishedTurn, reason: string): Communication & { id: string } {
  const usage = turn.charge ? estimatedUsage(turn.charge.promptTokens, turn.delivered.length) : undefined;
  const reply = buildReply(turn.parties, {
    ...turn.reply,
    text: turn.delivered,
    status: 'stopped',
    reason,
    usage,
    cost: usage ? costOf(turn.charge?.price, usage) : undefined,
    sent: justAfter(turn.promptSent),
  });
  return { ...reply, id: turn.reply.id };
}

/** A millisecond after `sent` (so the reply sorts right after its prompt); now, for a journal that did not say. */
function justAfter(sent: string | undefined): string {
  const time = sent === undefined ? Number.NaN : Date.parse(sent);
  return new Date(Number.isNaN(time) ? Date.now() : time + 1).toISOString();
}
