/**
 * The standalone host's `HostFhirEngine.offThreadGraphql`: Medplum's `$graphql` on Medplum's whole GraphQL schema,
 * run in a worker process of the host's own (`graphql-worker.ts`, forked with Node's IPC and structured clone) so
 * that neither the schema's build (one synchronous call of about 3.5 s and some 460 MB, at the first request that
 * needs it) nor the validation of each document against its ~30,900 types holds the event loop that answers every
 * other request of the host. The worker asks for each repository call its resolvers make; they are made here, with
 * the caller's own repository, so the caller's AccessPolicy decides as it does in-process.
 *
 * A process rather than a worker thread: a thread's heap, once it ends, stays committed to the host process (Node 24
 * here gives back some 10 % of it), whereas a process gives all of its memory back when it exits. The worker starts
 * at the first request and exits after `idleMs` without one (5 minutes by default), taking its copy of the
 * definitions and of the schema (about 700 MB) with it: a host that needed Medplum's whole schema once does not
 * keep its memory for good, and the host's own memory never holds it. If the worker dies (out of memory, killed),
 * the requests it held fail as server errors and the next request starts a new one; it exits with the host.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { FhirRepository } from '@medplum/fhir-router';
import type { OperationOutcome } from '@medplum/fhirtypes';
import type { HostLogger, OffThreadGraphql, OffThreadGraphqlRequest } from '../../host.ts';
import {
  FORWARDED_REPOSITORY_METHODS,
  deserializeResult,
  serializeError,
  type ForwardedRepositoryMethod,
  type FromWorker,
  type SerializedReadResult,
  type ToWorker,
} from './graphql-worker-protocol.ts';

/** How long the worker is kept without a request, by default. */
export const DEFAULT_GRAPHQL_WORKER_IDLE_MS = 5 * 60_000;

/** Options of the worker engine. */
export interface WorkerGraphqlOptions {
  /** Stop the worker after this long without a request (its schema's memory is given back). */
  readonly idleMs?: number;
  readonly logger?: HostLogger;
}

interface PendingRequest {
  readonly repo: FhirRepository;
  readonly resolve: (response: readonly [OperationOutcome, unknown?]) => void;
  readonly reject: (error: unknown) => void;
}

const FORWARDED: ReadonlySet<string> = new Set(FORWARDED_REPOSITORY_METHODS);

// The worker's entry beside this file: the TypeScript source when run from it, the compiled JavaScript in `dist/`.
const WORKER_ENTRY = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './graphql-worker.ts' : './graphql-worker.js', import.meta.url));

/** Medplum's `$graphql`, answered by a worker process; see the file comment. */
export class WorkerGraphqlEngine implements OffThreadGraphql {
  readonly #idleMs: number;
  readonly #logger: HostLogger | undefined;
  readonly #pending = new Map<number, PendingRequest>();
  #worker: ChildProcess | undefined;
  #idleTimer: NodeJS.Timeout | undefined;
  #nextId = 1;
  #closed = false;

  constructor(options: WorkerGraphqlOptions = {}) {
    this.#idleMs = options.idleMs ?? DEFAULT_GRAPHQL_WORKER_IDLE_MS;
    this.#logger = options.logger;
  }

  /** Whether a worker is running now; for tests and the host's own checks. */
  get running(): boolean {
    return this.#worker !== undefined;
  }

  handleRequest(request: OffThreadGraphqlRequest, repo: FhirRepository): Promise<readonly [OperationOutcome, unknown?]> {
    if (this.#closed) {
      return Promise.reject(new Error('the GraphQL worker is closed'));
    }
    const worker = this.#start();
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { repo, resolve, reject });
      clearTimeout(this.#idleTimer);
      setKeepsHostAlive(worker, true);
      const { query, operationName, variables, introspectionEnabled } = request;
      this.#post(worker, { kind: 'request', id, query, operationName, variables, introspectionEnabled });
    });
  }

  /** Stops the worker; requests still in it fail. For shutdown. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    await this.#stop();
  }

  #start(): ChildProcess {
    if (this.#worker) {
      return this.#worker;
    }
    // This process's Node flags carry over (heap settings), but not a debugger's port or a profiler's output.
    const execArgv = process.execArgv.filter((flag) => !/^--(inspect|debug|cpu-prof|heap-prof|prof)/.test(flag));
    const worker = fork(WORKER_ENTRY, [], { execArgv, serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.#worker = worker;
    worker.on('message', (message: FromWorker) => this.#onMessage(worker, message));
    worker.on('error', (error) => {
      this.#logger?.error('GraphQL worker failed', { cause: error.name });
      this.#failAll(worker, error);
    });
    worker.on('exit', (code, signal) => {
      if (this.#worker === worker && !this.#closed) {
        this.#logger?.warn('GraphQL worker exited', { code, signal });
      }
      this.#failAll(worker, new Error('the GraphQL worker stopped'));
    });
    this.#logger?.info('GraphQL worker started', { pid: worker.pid, idleMs: this.#idleMs });
    return worker;
  }

  async #stop(): Promise<void> {
    const worker = this.#worker;
    if (worker) {
      this.#failAll(worker, new Error('the GraphQL worker stopped'));
      if (worker.exitCode === null && worker.signalCode === null) {
        const exited = new Promise((resolve) => worker.once('exit', resolve));
        // Until it has exited: an idle worker no longer keeps the host alive, and a closing host waits for it.
        setKeepsHostAlive(worker, true);
        worker.kill('SIGTERM');
        await exited;
      }
    }
  }

  #onMessage(worker: ChildProcess, message: FromWorker): void {
    const pending = this.#pending.get(message.id);
    switch (message.kind) {
      case 'call':
        void this.#serveCall(worker, pending, message.callId, message.method, message.args);
        return;
      case 'set-mode':
        pending?.repo.setMode(message.mode as Parameters<FhirRepository['setMode']>[0]);
        return;
      case 'response':
        this.#settle(worker, message.id);
        pending?.resolve(message.result === undefined ? [message.outcome] : [message.outcome, deserializeResult(message.result)]);
        return;
      case 'failed':
        this.#settle(worker, message.id);
        pending?.reject(Object.assign(new Error(message.error.message), message.error.outcome ? { outcome: message.error.outcome } : {}));
        return;
    }
  }

  /** Makes one repository call for the worker and sends the answer back. */
  async #serveCall(worker: ChildProcess, pending: PendingRequest | undefined, callId: number, method: ForwardedRepositoryMethod, args: readonly unknown[]): Promise<void> {
    try {
      if (!pending) {
        throw new Error('the request this call belongs to is over');
      }
      if (!FORWARDED.has(method) || !Array.isArray(args)) {
        throw new Error(`the repository call ${String(method).slice(0, 40)} is not forwarded`);
      }
      const call = pending.repo[method] as (...callArgs: unknown[]) => Promise<unknown>;
      const value = await call.apply(pending.repo, args);
      const sent: unknown = method === 'readReferences' && Array.isArray(value) ? value.map(toReadResult) : value;
      this.#post(worker, { kind: 'reply', callId, value: sent });
    } catch (error) {
      this.#post(worker, { kind: 'reply', callId, error: serializeError(error) });
    }
  }

  #post(worker: ChildProcess, message: ToWorker): void {
    try {
      worker.send(message);
    } catch (error) {
      // A value that cannot be cloned (none of Medplum's): the call fails, in the worker, as a repository error would.
      if (message.kind === 'reply') {
        worker.send({ kind: 'reply', callId: message.callId, error: serializeError(error) } satisfies ToWorker);
      } else {
        this.#pending.get(message.id)?.reject(error);
        this.#settle(worker, message.id);
      }
    }
  }

  /** One request is over: when none is left, the worker no longer keeps the process alive, and waits `idleMs`. */
  #settle(worker: ChildProcess, id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size > 0 || this.#worker !== worker) {
      return;
    }
    setKeepsHostAlive(worker, false);
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => {
      if (this.#pending.size === 0 && this.#worker === worker) {
        this.#logger?.info('GraphQL worker stopped after being idle', { idleMs: this.#idleMs });
        void this.#stop();
      }
    }, this.#idleMs);
    this.#idleTimer.unref();
  }

  #failAll(worker: ChildProcess, error: Error): void {
    if (this.#worker !== worker) {
      return;
    }
    this.#worker = undefined;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    pending.forEach((request) => request.reject(error));
  }
}

/** Whether the worker (its process and its IPC channel) keeps the host's event loop alive: only while it works. */
function setKeepsHostAlive(worker: ChildProcess, keep: boolean): void {
  if (keep) {
    worker.ref();
    worker.channel?.ref();
  } else {
    worker.unref();
    worker.channel?.unref();
  }
}

function toReadResult(item: unknown): SerializedReadResult {
  return item instanceof Error ? { error: serializeError(item) } : { resource: item };
}
