/**
 * The reply journal: a local append-only file that holds, for every chat turn whose reply is not yet in the FHIR
 * store, what is needed to record it. It is how fhirgate keeps its promise of one reply record per accepted
 * request when the process dies or the store refuses writes:
 * - `open` before the prompt is written: the ids of the prompt and the reply (fixed in advance) and everything to
 *   build the reply's record except how it ends, the history it sends the model included;
 * - `history` with the patient context a turn shares (what the reply's record says the model was sent), before its
 *   disclosure is recorded; the conversation's history the model is sent is in `open`, loaded before it;
 * - `tool` for each FHIR tool call run for the model, before the model is given its result;
 * - `text` for each piece of reply text, written before the piece goes to the socket: the pieces of one turn of the
 *   event loop, of every stream, in one write at its end (`setImmediate`), and the streams' writers hold the pieces'
 *   frames until that write returns (`whenWritten`, sse-writer.ts), so a client never sees text the journal lacks;
 * - `outbox` with the whole reply resource when the store did not take it (fsync'd: the record exists only here);
 * - `closed` once the reply is in the store, or when the prompt was never stored (the turn was refused): with the
 *   text lines of its turn of the event loop, not waited for (a crash can only leave a turn that is on record).
 *
 * After a crash or SIGKILL the next start reads the journal: a turn whose prompt is on record gets its reply
 * recorded as `stopped` with the text delivered, and an outbox entry is written (see reply-records.ts). Appends are plain
 * `write`s, which survive the process being killed (the kernel holds them); only outbox entries are fsync'd, so a
 * power loss can lose the text of a stream that was running, never a record the store refused.
 *
 * Each process has its own journal directory under the configured root, so that instances may share the root. Its
 * `LOCK` file is a lease (journal-lease.ts): the instance's random id, where it runs (the machine's boot and PID
 * namespace), its pid, and when the lease expires; the process renews it every `heartbeatMs`. Another process adopts
 * a journal whose writer is gone: at once when that writer ran in its own PID namespace (its pid is gone, or is the
 * adopter's own: an earlier life), else once its lease has expired, checked at start and at every beat after. A pid
 * alone is no proof across containers, where every instance is PID 1. The file is rewritten when it grows past a
 * size, keeping only the turns still unfinished.
 */
import { randomBytes } from 'node:crypto';
import { adoptOrphans, journalLease, LOCK, STAGING_PREFIX, type JournalLease, type JournalLeaseOptions } from './journal-lease.ts';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Communication } from '@medplum/fhirtypes';
import type { ModelPrice } from '../governance/model-prices.ts';
import type { ConversationParties, FhirToolRecord, ReplyRecord } from './communication-builders.ts';

/** What a journal knows about a turn when it opens: everything to build its reply except how it ended. */
export interface OpenTurn {
  readonly projectId: string;
  readonly parties: ConversationParties;
  readonly reply: Omit<ReplyRecord, 'text' | 'status' | 'reason' | 'usage' | 'sent'>;
  /** When the turn's prompt was sent (ISO 8601): a reply recorded later is placed right after it. */
  readonly promptSent?: string;
  /**
   * What a reply recorded without the provider's usage (the process stopped first) is charged: the estimated
   * tokens of what the model was sent, and the model's price for the project (governance/usage-estimate.ts).
   */
  readonly charge?: { readonly promptTokens: number; readonly price?: ModelPrice };
}

/** A turn found unfinished in the journal of an earlier process. */
export interface UnfinishedTurn extends OpenTurn {
  /** The reply text the client was sent before the process stopped. */
  readonly delivered: string;
  /** When set, the reply as it was to be stored (the store had refused it): store this, not a `stopped` reply. */
  readonly outbox?: Communication;
}

type Entry =
  | ({ readonly op: 'open'; readonly id: string } & OpenTurn)
  | { readonly op: 'history'; readonly id: string; readonly history: OpenTurn['reply']['history']; readonly patientContext?: OpenTurn['reply']['patientContext'] }
  | { readonly op: 'tool'; readonly id: string; readonly call: FhirToolRecord }
  | { readonly op: 'text'; readonly id: string; readonly text: string }
  | { readonly op: 'outbox'; readonly id: string; readonly resource: Communication }
  | { readonly op: 'closed'; readonly id: string };

const FILE = 'replies.jsonl';
/** How long `closed` lines wait for another line to go with, when nothing else is written. */
const CLOSED_LINES_WAIT_MS = 1000;
// The journal holds prompts' parties and reply text: owner-only, whatever the process's umask.
const OWNER_ONLY_DIRECTORY = 0o700;
const OWNER_ONLY_FILE = 0o600;
/** The file is rewritten with only unfinished turns once it grows past this. */
const DEFAULT_ROTATE_BYTES = 8 * 1024 * 1024;

/** How the journal's lines reach its file: `fs.writeSync` (a test gives one that fails, as a full disk would). */
export type WriteLines = (fd: number, text: string) => number;

/** How the journal makes a file or a directory durable: `fs.fsyncSync` (a test counts the calls). */
export type SyncFile = (fd: number) => void;

/** Called once the text lines waiting when it was given are in the file, or with the error that kept them out. */
export type AfterWrite = (error?: unknown) => void;

interface TurnState extends OpenTurn {
  reply: OpenTurn['reply'];
  delivered: string;
  outbox?: Communication;
}

/** The journal of one process; `undefined` directory: kept in memory only (no recovery after a crash). */
export class ReplyJournal {
  readonly #dir: string | undefined;
  readonly #rotateBytes: number;
  readonly #write: WriteLines;
  #sync: SyncFile = fsyncSync;
  readonly #turns = new Map<string, TurnState>();
  #fd: number | undefined;
  #bytes = 0;
  /** Text lines not yet written, and who waits for them (the writers holding their frames). */
  #waitingLines = '';
  #waiting: AfterWrite[] = [];
  #scheduled = false;
  /** `closed` lines not yet written: they go with the next write, or after `#closedLinesWaitMs` (see `closed`). */
  #closedLines = '';
  #closedLinesWaitMs = CLOSED_LINES_WAIT_MS;
  #closedLinesTimer: NodeJS.Timeout | undefined;
  #unfinished: readonly UnfinishedTurn[];
  readonly #root: string | undefined;
  readonly #lease: JournalLease | undefined;
  #beat: NodeJS.Timeout | undefined;
  #onAdopted: ((turns: readonly UnfinishedTurn[]) => void) | undefined;

  private constructor(root: string | undefined, dir: string | undefined, lease: JournalLease | undefined, rotateBytes: number, write: WriteLines, unfinished: UnfinishedTurn[]) {
    this.#root = root;
    this.#dir = dir;
    this.#lease = lease;
    this.#rotateBytes = rotateBytes;
    this.#write = write;
    this.#unfinished = unfinished;
  }

  /** Turns an earlier process left unfinished, found when this journal was opened. */
  get unfinished(): readonly UnfinishedTurn[] {
    return this.#unfinished;
  }

  /**
   * Opens this process's journal under `root` (created if needed): a directory of its own, `<pid>-<time>-<random>`, so that
   * several instances may share one root (as they share one data directory), with the lease it renews every beat.
   * Journals under `root` whose writer is gone (journal-lease.ts) are adopted, now and at every beat: renamed into
   * this one (atomic, so two instances never both take one), their unfinished turns copied into this journal's
   * file, then removed.
   */
  static open(
    root: string | undefined,
    options: {
      readonly rotateBytes?: number;
      readonly writeLines?: WriteLines;
      readonly syncFile?: SyncFile;
      readonly lease?: JournalLeaseOptions;
      readonly closedLinesWaitMs?: number;
    } = {},
  ): ReplyJournal {
    const rotateBytes = options.rotateBytes ?? DEFAULT_ROTATE_BYTES;
    const write = options.writeLines ?? writeSync;
    if (!root) {
      return new ReplyJournal(undefined, undefined, undefined, rotateBytes, write, []);
    }
    const lease = journalLease(options.lease);
    mkdirSync(root, { recursive: true, mode: OWNER_ONLY_DIRECTORY });
    const name = `${lease.pid}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const dir = join(root, name);
    // Made whole under a name no instance adopts, then renamed into place (atomic): another instance's beat never
    // sees this journal without its lease, or with its lease half written, and takes it from under its opener.
    const opening = join(root, `${STAGING_PREFIX}${name}`);
    mkdirSync(opening, { mode: OWNER_ONLY_DIRECTORY });
    writeFileSync(join(opening, LOCK), lease.render(), { flush: true, mode: OWNER_ONLY_FILE });
    renameSync(opening, dir);
    const journal = new ReplyJournal(root, dir, lease, rotateBytes, write, []);
    journal.#sync = options.syncFile ?? fsyncSync;
    journal.#closedLinesWaitMs = options.closedLinesWaitMs ?? CLOSED_LINES_WAIT_MS;
    journal.#unfinished = journal.#adoptOrphans(false);
    journal.#beat = setInterval(journal.#renew, lease.heartbeatMs);
    journal.#beat.unref();
    return journal;
  }

  /**
   * `listener` is given the turns of journals adopted after this one opened (their writer's lease expired since): the
   * caller records them as it records `unfinished`.
   */
  onAdopted(listener: (turns: readonly UnfinishedTurn[]) => void): void {
    this.#onAdopted = listener;
  }

  /** Renews this journal's lease, then adopts the journals whose writers are gone since the last beat. */
  readonly #renew = (): void => {
    if (this.#fd === undefined || !this.#dir || !this.#lease) {
      return;
    }
    try {
      if (!existsSync(this.#dir)) {
        // Taken over while this process stood still past its lease (a stop longer than `ttlMs`): the instance that
        // took it records these turns as stopped, by their reply ids (the same records this process writes).
        clearInterval(this.#beat);
        return;
      }
      const lock = join(this.#dir, LOCK);
      writeFileSync(`${lock}.next`, this.#lease.render(), { mode: OWNER_ONLY_FILE });
      renameSync(`${lock}.next`, lock);
      const adopted = this.#adoptOrphans(true);
      if (adopted.length > 0) {
        this.#onAdopted?.(adopted);
      }
    } catch {
      // A disk that refuses the beat: the next one tries again (the lease lasts several beats).
    }
  };

  /**
   * Moves every journal under the root whose writer is gone into this one, copies their unfinished turns into this
   * journal's file, then removes them; returns those turns.
   */
  #adoptOrphans(whileRunning: boolean): UnfinishedTurn[] {
    if (!this.#root || !this.#dir || !this.#lease) {
      return [];
    }
    const adopted = adoptOrphans(this.#root, this.#dir, this.#lease, whileRunning);
    const unfinished = adopted.flatMap((orphan) => {
      const path = join(orphan, FILE);
      return existsSync(path) ? readUnfinished(readFileSync(path, 'utf8')) : [];
    });
    for (const turn of unfinished) {
      this.#turns.set(turn.reply.id, { ...turn, delivered: turn.delivered });
    }
    if (adopted.length > 0 || this.#fd === undefined) {
      // The adopted turns are on this journal's file (fsync'd) before their old files go: a crash now loses none.
      this.writeWaiting();
      this.#rewrite();
    }
    for (const orphan of adopted) {
      rmSync(orphan, { recursive: true, force: true });
    }
    return unfinished;
  }

  /** Turns not yet recorded, this process's and recovered ones. */
  get openTurns(): number {
    return this.#turns.size;
  }

  /** True while the turn is open here (not closed). */
  isOpen(id: string): boolean {
    return this.#turns.has(id);
  }

  /** A turn is about to write its prompt. */
  open(turn: OpenTurn): void {
    this.#turns.set(turn.reply.id, { ...turn, delivered: '' });
    this.#append({ op: 'open', id: turn.reply.id, ...turn });
  }

  /** The history (and patient context) sent to the model, as the reply's record will state it. */
  history(id: string, history: OpenTurn['reply']['history'], patientContext?: OpenTurn['reply']['patientContext']): void {
    const state = this.#turns.get(id);
    if (!state) {
      return;
    }
    state.reply = { ...state.reply, history, patientContext };
    this.#append({ op: 'history', id, history, patientContext });
  }

  /** A FHIR tool call ran for the model; its result is about to be given to the model. */
  toolCall(id: string, call: FhirToolRecord): void {
    const state = this.#turns.get(id);
    if (!state) {
      return;
    }
    state.reply = withToolCall(state.reply, call);
    this.#append({ op: 'tool', id, call });
  }

  /**
   * Reply text is about to be sent to the client: its line is written with the rest of this turn of the event loop's
   * (or sooner, by `writeWaiting` or the next entry of another kind); hold the text's frame until `whenWritten`.
   */
  delivered(id: string, text: string): void {
    const state = this.#turns.get(id);
    if (!state || text === '') {
      return;
    }
    state.delivered += text;
    if (this.#fd === undefined) {
      return;
    }
    // The one entry written per streamed piece: composed directly, without building an entry object.
    this.#waitingLines += `{"op":"text","id":${JSON.stringify(id)},"text":${JSON.stringify(text)}}\n`;
    this.#writeAtEndOfLoopTurn();
  }

  #writeAtEndOfLoopTurn(): void {
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#writeScheduled);
    }
  }

  /**
   * Calls `then` once the text lines appended so far are in the file (or with the error that kept them out), and
   * returns true; returns false, without calling it, when no line waits (nothing to hold back).
   */
  whenWritten(then: AfterWrite): boolean {
    if (this.#waitingLines === '') {
      return false;
    }
    this.#waiting.push(then);
    return true;
  }

  /** Writes the waiting text lines now (a stream's first piece, which goes out at once); throws the write's error. */
  writeWaiting(): void {
    if (this.#waitingLines !== '') {
      this.#appendLine('');
    }
  }

  /** The store refused the reply of an open turn: the resource is kept here, on disk, until it is written. */
  outbox(id: string, resource: Communication): void {
    const state = this.#turns.get(id);
    if (state) {
      state.outbox = resource;
    }
    this.#append({ op: 'outbox', id, resource }, { sync: true });
  }

  /**
   * Nothing is left to do for the turn: its reply is in the store, or its prompt never was. Nothing waits for the
   * line: a turn whose `closed` line a crash kept out is found at the next start with its reply on record, and only
   * closed then (reply-records.ts writes a recovered reply only where none is stored). So it has no write of its own:
   * it goes with the next line written (under load, the next turn's `open`), or within `closedLinesWaitMs` when
   * nothing else is written.
   */
  closed(id: string): void {
    if (this.#turns.delete(id) && this.#fd !== undefined) {
      this.#closedLines += `{"op":"closed","id":${JSON.stringify(id)}}\n`;
      this.#closedLinesTimer ??= setTimeout(this.#writeClosedLines, this.#closedLinesWaitMs).unref();
    }
  }

  readonly #writeClosedLines = (): void => {
    this.#closedLinesTimer = undefined;
    if (this.#closedLines === '') {
      return;
    }
    try {
      this.#appendLine('');
    } catch {
      // Nobody waits for these lines: the next start closes the turns they name (see `closed`).
    }
  };

  /** Closes the file; a journal with unfinished turns stays for the next start to adopt, an empty one is removed. */
  close(): void {
    clearInterval(this.#beat);
    clearTimeout(this.#closedLinesTimer);
    this.#closedLinesTimer = undefined;
    this.#lease?.release();
    if (this.#fd === undefined || !this.#dir) {
      return;
    }
    if (this.#waitingLines !== '' || this.#closedLines !== '') {
      this.#appendLine('');
    }
    this.#sync(this.#fd);
    closeSync(this.#fd);
    this.#fd = undefined;
    if (this.#turns.size === 0) {
      rmSync(this.#dir, { recursive: true, force: true });
    } else {
      // `force`: another instance may have taken the journal over while this process stood still.
      rmSync(join(this.#dir, LOCK), { force: true });
    }
  }

  #append(entry: Entry, options: { readonly sync?: boolean } = {}): void {
    this.#appendLine(`${JSON.stringify(entry)}\n`, options);
  }

  /** Writes `line` after the text lines waiting (one write, in order), then tells those waiting for them how it went. */
  #appendLine(line: string, options: { readonly sync?: boolean } = {}): void {
    if (this.#fd === undefined) {
      return;
    }
    // The closed lines after the waiting text (a turn's text before its `closed`), then the line itself.
    const text = this.#waitingLines + this.#closedLines + line;
    const waiting = this.#waiting;
    this.#waitingLines = '';
    this.#closedLines = '';
    this.#waiting = [];
    let failure: unknown;
    try {
      this.#bytes += this.#write(this.#fd, text);
      if (options.sync) {
        this.#sync(this.#fd);
      }
      if (this.#bytes > this.#rotateBytes) {
        this.#rewrite();
      }
    } catch (error) {
      failure = error;
    }
    for (const then of waiting) {
      then(failure);
    }
    if (failure !== undefined) {
      throw failure;
    }
  }

  /** The end of a turn of the event loop: its text lines in one write; a failure reaches only those waiting for them. */
  readonly #writeScheduled = (): void => {
    this.#scheduled = false;
    try {
      this.writeWaiting();
    } catch {
      // Told to the writers holding the lines' frames (whenWritten): their turns fail, as an append's caller does.
    }
  };

  /** Replaces the file with one holding only the unfinished turns, atomically (write, fsync, rename). */
  #rewrite(): void {
    if (!this.#dir) {
      return;
    }
    const path = join(this.#dir, FILE);
    const next = `${path}.next`;
    const lines: string[] = [];
    for (const [id, state] of this.#turns) {
      const { delivered, outbox, ...open } = state;
      lines.push(JSON.stringify({ op: 'open', id, ...open } satisfies Entry));
      if (delivered) {
        lines.push(JSON.stringify({ op: 'text', id, text: delivered } satisfies Entry));
      }
      if (outbox) {
        lines.push(JSON.stringify({ op: 'outbox', id, resource: outbox } satisfies Entry));
      }
    }
    const content = lines.length ? `${lines.join('\n')}\n` : '';
    writeFileSync(next, content, { flush: true, mode: OWNER_ONLY_FILE });
    if (this.#fd !== undefined) {
      closeSync(this.#fd);
    }
    renameSync(next, path);
    fsyncDirectory(this.#dir, this.#sync);
    this.#fd = openSync(path, 'a', OWNER_ONLY_FILE);
    this.#bytes = Buffer.byteLength(content);
  }
}

/** Folds the journal's lines into the turns not recorded; a torn last line (the process died writing it) is skipped. */
export function readUnfinished(content: string): UnfinishedTurn[] {
  const turns = new Map<string, TurnState>();
  for (const line of content.split('\n')) {
    const entry = parseLine(line);
    if (!entry) {
      continue;
    }
    if (entry.op === 'open') {
      const { op: _op, id, ...open } = entry;
      turns.set(id, { ...open, delivered: '' });
      continue;
    }
    const state = turns.get(entry.id);
    if (!state) {
      continue;
    }
    if (entry.op === 'text') {
      state.delivered += entry.text;
    } else if (entry.op === 'history') {
      state.reply = { ...state.reply, history: entry.history, patientContext: entry.patientContext };
    } else if (entry.op === 'tool') {
      state.reply = withToolCall(state.reply, entry.call);
    } else if (entry.op === 'outbox') {
      state.outbox = entry.resource;
    } else {
      turns.delete(entry.id);
    }
  }
  return [...turns.values()];
}

function withToolCall(reply: OpenTurn['reply'], call: FhirToolRecord): OpenTurn['reply'] {
  return { ...reply, fhirTools: [...(reply.fhirTools ?? []), call] };
}

function parseLine(line: string): Entry | undefined {
  if (!line.trim()) {
    return undefined;
  }
  try {
    const entry = JSON.parse(line) as Entry;
    return typeof entry === 'object' && entry !== null && typeof entry.id === 'string' ? entry : undefined;
  } catch {
    return undefined;
  }
}

function fsyncDirectory(dir: string, sync: SyncFile): void {
  const fd = openSync(dir, 'r');
  try {
    sync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Size of the journal file, for tests and diagnostics. */
export function journalFileBytes(dir: string): number {
  const path = join(dir, FILE);
  return existsSync(path) ? statSync(path).size : 0;
}
