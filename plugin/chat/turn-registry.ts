/**
 * The turns running on each instance, in the Redis that instances share (a Medplum server always has one), so that
 * an instance lost for good (its machine gone, its disk with it) still leaves every accepted turn a reply record:
 * another instance writes it. The reply journal (reply-journal.ts) covers a process that dies and starts again on
 * the same disk; this covers the instance that never comes back.
 * - Each instance beats every `heartbeatMs` (`<prefix>instance:<id>`, expiring after `instanceTtlMs`) and is
 *   listed in `<prefix>instances` (the prefix is the plugin's `redisKeyPrefix`, `fhirgate:` by default).
 * - A turn is registered when it opens (`<prefix>turns:<instance>`, a hash of reply id to the turn), its reply
 *   text is appended as it goes out (`<prefix>turn-text:<reply id>`, at most `textFlushMs` behind the client),
 *   a reply the store refused is put there whole, and the turn is removed once its reply is on record.
 * - Every `sweepMs` each instance looks for instances whose beat expired and moves their turns into its own hash,
 *   atomically (one Lua script), so two instances never both take a turn, and an instance that dies while
 *   recording them leaves them to the next. So a lost instance's turns are recorded within about
 *   `instanceTtlMs + sweepMs` (20 s by default) by whichever instance is alive.
 * Redis calls never hold a turn up: they go out without waiting, and only while the connection is ready; a sweep
 * waits at most `deadlineMs`. A Redis that fails is logged once when it goes, and once when it is back.
 */
import { randomUUID } from 'node:crypto';
import type { HostLogger, HostRedis } from '../host.ts';
import type { FhirToolRecord } from './communication-builders.ts';
import type { OpenTurn, UnfinishedTurn } from './reply-journal.ts';

/** How the registry keeps time. */
export interface TurnRegistryOptions {
  readonly heartbeatMs?: number;
  readonly instanceTtlMs?: number;
  readonly sweepMs?: number;
  readonly textFlushMs?: number;
  /** Longest a sweep waits for Redis. */
  readonly deadlineMs?: number;
  /** How long the registry's keys live without being touched (a safety net; turns end long before). */
  readonly keyTtlMs?: number;
  /** Prefix of every key (the plugin's `redisKeyPrefix`). */
  readonly keyPrefix?: string;
}

/** A turn as the registry keeps it: the journal's open turn, and the reply the store refused, if any. */
interface RegisteredTurn extends OpenTurn {
  readonly outbox?: UnfinishedTurn['outbox'];
}

/** What this instance knows of a turn it registered: the text sent so far too, to share again after an outage. */
interface OwnTurn {
  turn: RegisteredTurn;
  delivered: string;
}

/** The registry's keys under one prefix. */
class RegistryKeys {
  readonly instances: string;
  readonly #prefix: string;

  constructor(prefix: string) {
    this.#prefix = prefix;
    this.instances = `${prefix}instances`;
  }

  instance(id: string): string {
    return `${this.#prefix}instance:${id}`;
  }

  turns(id: string): string {
    return `${this.#prefix}turns:${id}`;
  }

  text(replyId: string): string {
    return `${this.#prefix}turn-text:${replyId}`;
  }
}

// Moves every turn of a lost instance into the claimer's hash and deletes the lost one's; returns what it moved.
const CLAIM_SCRIPT = `
local moved = redis.call('HGETALL', KEYS[1])
for i = 1, #moved, 2 do
  redis.call('HSET', KEYS[2], moved[i], moved[i + 1])
end
redis.call('DEL', KEYS[1])
return moved
`;

/** One instance's registry. */
export class TurnRegistry {
  readonly instanceId = randomUUID();
  readonly #redis: HostRedis;
  readonly #logger: HostLogger | undefined;
  readonly #options: Required<Omit<TurnRegistryOptions, 'keyPrefix'>>;
  readonly #keys: RegistryKeys;
  readonly #turns = new Map<string, OwnTurn>();
  readonly #pendingText = new Map<string, string>();
  #flushTimer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #failing = false;
  /** True when commands were lost since the last time every open turn was shared. */
  #outOfStep = false;
  /** True once the connection was ready: before, a connection still being made is not an outage. */
  #everReady = false;

  constructor(redis: HostRedis, logger: HostLogger | undefined, options: TurnRegistryOptions = {}) {
    this.#redis = redis;
    this.#logger = logger;
    this.#keys = new RegistryKeys(options.keyPrefix ?? 'fhirgate:');
    this.#options = {
      heartbeatMs: options.heartbeatMs ?? 3_000,
      instanceTtlMs: options.instanceTtlMs ?? 15_000,
      sweepMs: options.sweepMs ?? 5_000,
      textFlushMs: options.textFlushMs ?? 250,
      deadlineMs: options.deadlineMs ?? 2_000,
      keyTtlMs: options.keyTtlMs ?? 24 * 3600 * 1000,
    };
    this.#beat();
    this.#heartbeat = setInterval(() => this.#beat(), this.#options.heartbeatMs);
    this.#heartbeat.unref();
  }

  /** How often a sweep should run. */
  get sweepMs(): number {
    return this.#options.sweepMs;
  }

  /** A turn is about to write its prompt. */
  open(turn: OpenTurn): void {
    this.#turns.set(turn.reply.id, { turn, delivered: '' });
    this.#send('HSET', this.#keys.turns(this.instanceId), turn.reply.id, JSON.stringify(turn));
  }

  /** The history (and patient context) the model is sent, for the reply's record. */
  history(replyId: string, history: OpenTurn['reply']['history'], patientContext?: OpenTurn['reply']['patientContext']): void {
    this.#change(replyId, (turn) => ({ ...turn, reply: { ...turn.reply, history, patientContext } }));
  }

  /** A FHIR tool call ran for the model. */
  toolCall(replyId: string, call: FhirToolRecord): void {
    this.#change(replyId, (turn) => ({ ...turn, reply: { ...turn.reply, fhirTools: [...(turn.reply.fhirTools ?? []), call] } }));
  }

  /** Reply text about to go to the client: appended within `textFlushMs`. */
  delivered(replyId: string, text: string): void {
    const own = this.#turns.get(replyId);
    if (!own || text === '') {
      return;
    }
    own.delivered += text;
    this.#pendingText.set(replyId, (this.#pendingText.get(replyId) ?? '') + text);
    this.#flushTimer ??= setTimeout(() => this.#flushText(), this.#options.textFlushMs);
  }

  /** The store refused the reply: the registry holds it whole until it is written. */
  outbox(replyId: string, resource: NonNullable<UnfinishedTurn['outbox']>): void {
    this.#change(replyId, (turn) => ({ ...turn, outbox: resource }));
  }

  /** The turn's reply is on record (or its prompt never was): nothing is left to do for it. */
  closed(replyId: string): void {
    if (!this.#turns.delete(replyId)) {
      return;
    }
    this.#pendingText.delete(replyId);
    this.#send('HDEL', this.#keys.turns(this.instanceId), replyId);
    this.#send('DEL', this.#keys.text(replyId));
  }

  /**
   * Takes over the turns of instances whose beat has expired: each comes back with the text its client was sent
   * (as far as it reached Redis) and stays registered here until `closed`.
   */
  async claimLost(): Promise<UnfinishedTurn[]> {
    if (this.#redis.status !== 'ready') {
      return [];
    }
    try {
      return await withDeadline(this.#claim(), this.#options.deadlineMs);
    } catch (error) {
      this.#failed(error);
      return [];
    }
  }

  /** Stops beating; the turns still open here stay registered for another instance (or this one's next start). */
  close(): void {
    clearInterval(this.#heartbeat);
    this.#flushText();
    if (this.#turns.size === 0) {
      this.#send('SREM', this.#keys.instances, this.instanceId);
      this.#send('DEL', this.#keys.instance(this.instanceId));
    }
  }

  #change(replyId: string, change: (turn: RegisteredTurn) => RegisteredTurn): void {
    const own = this.#turns.get(replyId);
    if (!own) {
      return;
    }
    own.turn = change(own.turn);
    this.#send('HSET', this.#keys.turns(this.instanceId), replyId, JSON.stringify(own.turn));
  }

  async #claim(): Promise<UnfinishedTurn[]> {
    const claimed: UnfinishedTurn[] = [];
    const instances = (await this.#redis.call('SMEMBERS', this.#keys.instances)) as string[];
    for (const other of instances) {
      if (other === this.instanceId || (await this.#redis.call('EXISTS', this.#keys.instance(other))) === 1) {
        continue;
      }
      const moved = (await this.#redis.call('EVAL', CLAIM_SCRIPT, 2, this.#keys.turns(other), this.#keys.turns(this.instanceId))) as string[];
      await this.#redis.call('SREM', this.#keys.instances, other);
      for (let index = 0; index + 1 < moved.length; index += 2) {
        const turn = JSON.parse(moved[index + 1]) as RegisteredTurn;
        const delivered = ((await this.#redis.call('GET', this.#keys.text(turn.reply.id))) as string | null) ?? '';
        this.#turns.set(turn.reply.id, { turn, delivered });
        claimed.push({ ...turn, delivered });
      }
    }
    this.#recovered();
    return claimed;
  }

  #beat(): void {
    this.#send('SET', this.#keys.instance(this.instanceId), '1', 'PX', this.#options.instanceTtlMs);
    this.#send('SADD', this.#keys.instances, this.instanceId);
    this.#send('PEXPIRE', this.#keys.turns(this.instanceId), this.#options.keyTtlMs);
  }

  #flushText(): void {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    for (const [replyId, text] of this.#pendingText) {
      this.#send('APPEND', this.#keys.text(replyId), text);
      this.#send('PEXPIRE', this.#keys.text(replyId), this.#options.keyTtlMs);
    }
    this.#pendingText.clear();
  }

  /** Sends a command without waiting for it; none while the connection is not ready (they would only queue up). */
  #send(command: string, ...args: (string | number)[]): void {
    if (this.#redis.status !== 'ready') {
      if (this.#everReady) {
        this.#failed(new Error(`Redis is ${this.#redis.status}`));
      } else {
        // Still connecting at start-up: nothing has failed; what is not sent now is shared once it is ready.
        this.#outOfStep = true;
      }
      return;
    }
    this.#everReady = true;
    this.#redis.call(command, ...args).then(
      () => this.#recovered(),
      (error: unknown) => this.#failed(error)
    );
  }

  #failed(error: unknown): void {
    this.#outOfStep = true;
    if (!this.#failing) {
      this.#failing = true;
      this.#logger?.warn('fhirgate cannot reach Redis: turns of this instance are recoverable from its own journal only until it is back', {
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  #recovered(): void {
    if (this.#failing) {
      this.#failing = false;
      this.#logger?.info('fhirgate reaches Redis again: turns of this instance are recoverable by the other instances', {});
    }
    if (this.#outOfStep) {
      this.#share();
    }
  }

  /** After commands were lost (Redis unreachable), shares every open turn again, its text whole. */
  #share(): void {
    this.#outOfStep = false;
    this.#pendingText.clear();
    for (const [replyId, own] of this.#turns) {
      this.#send('HSET', this.#keys.turns(this.instanceId), replyId, JSON.stringify(own.turn));
      this.#send('SET', this.#keys.text(replyId), own.delivered, 'PX', this.#options.keyTtlMs);
    }
  }
}

/** `work`, or a rejection after `milliseconds`. */
function withDeadline<T>(work: Promise<T>, milliseconds: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${milliseconds} ms`)), milliseconds);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
