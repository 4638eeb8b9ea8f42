/**
 * The standalone host's GraphQL worker: a process of its own (forked by `off-thread-graphql.ts`, IPC only) running
 * Medplum's `$graphql` handler (`FhirRouter.handleRequest`) over the host's definitions (`loadFhirDefinitions`, in
 * this process's own `@medplum/core`), so that Medplum's whole GraphQL schema is built and held here, and its build
 * (one synchronous call of seconds) holds this process only. Each request's repository lives on the host's thread: every call
 * Medplum's resolvers make on it is sent there and answered with the caller's repository (`off-thread-graphql.ts`),
 * so the caller's AccessPolicy decides every read and write exactly as in-process. Medplum's answer comes back as
 * it is, errors in a form that crosses threads (`graphql-worker-protocol.ts`).
 */
import { randomUUID } from 'node:crypto';
import { OperationOutcomeError, type WithId } from '@medplum/core';
import { FhirRepository, FhirRouter, makeSimpleRequest, type RepositoryMode } from '@medplum/fhir-router';
import type { Bundle, OperationOutcome, Reference, Resource } from '@medplum/fhirtypes';
import { compactHeap } from './compact-heap.ts';
import { loadFhirDefinitions } from './fhir-definitions.ts';
import {
  serializeError,
  type ForwardedRepositoryMethod,
  type FromWorker,
  type SerializedError,
  type SerializedGraphqlError,
  type SerializedReadResult,
  type SerializedResult,
  type ToWorker,
} from './graphql-worker-protocol.ts';

if (!process.send) {
  throw new Error('graphql-worker.ts runs as a worker process of the standalone host, forked with an IPC channel');
}
// The host is gone (it exited, or was killed): so is the reason to be.
process.on('disconnect', () => process.exit(0));
// Ctrl-C in a terminal reaches the whole process group: the host drains first and then stops this process itself.
process.on('SIGINT', () => undefined);
loadFhirDefinitions();
// The definition bundles parsed for the index are garbage now; so is, after the first request, what building
// Medplum's schema left behind. Given back at once: this thread has its own heap, and blocks only itself meanwhile.
compactHeap();
let compactedAfterBuild = false;

const routers = new Map<boolean, FhirRouter>();
const waitingCalls = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void }>();
let nextCallId = 1;

function send(message: FromWorker): void {
  process.send?.(message);
}

/** Asks the host to call `method` on request `id`'s repository. */
function callHost(id: number, method: ForwardedRepositoryMethod, args: readonly unknown[]): Promise<unknown> {
  const callId = nextCallId++;
  return new Promise((resolve, reject) => {
    waitingCalls.set(callId, { resolve, reject });
    send({ kind: 'call', id, callId, method, args });
  });
}

/** An error of the host's repository, thrown again as this thread's copy of Medplum would have thrown it. */
function rebuildError(error: SerializedError): Error {
  return error.outcome ? new OperationOutcomeError(error.outcome) : new Error(error.message);
}

/** The caller's repository, on the host's thread: each call crosses to it and back. */
class ForwardedRepository extends FhirRepository {
  readonly #id: number;

  constructor(id: number) {
    super();
    this.#id = id;
  }

  #call<T>(method: ForwardedRepositoryMethod, ...args: unknown[]): Promise<T> {
    return callHost(this.#id, method, args) as Promise<T>;
  }

  setMode(mode: RepositoryMode): void {
    send({ kind: 'set-mode', id: this.#id, mode });
  }

  generateId(): string {
    return randomUUID();
  }

  createResource<T extends Resource>(resource: T): Promise<WithId<T>> {
    return this.#call('createResource', resource);
  }

  readResource<T extends Resource>(resourceType: string, id: string): Promise<WithId<T>> {
    return this.#call('readResource', resourceType, id);
  }

  readReference<T extends Resource>(reference: Reference<T>): Promise<WithId<T>> {
    return this.#call('readReference', reference);
  }

  async readReferences<T extends Resource>(references: readonly Reference<T>[]): Promise<(T | Error)[]> {
    const results = await this.#call<SerializedReadResult[]>('readReferences', references);
    return results.map((result) => ('error' in result ? rebuildError(result.error) : (result.resource as T)));
  }

  updateResource<T extends Resource>(resource: T): Promise<WithId<T>> {
    return this.#call('updateResource', resource);
  }

  deleteResource(resourceType: string, id: string): Promise<void> {
    return this.#call('deleteResource', resourceType, id);
  }

  patchResource<T extends Resource>(resourceType: T['resourceType'], id: string, patch: unknown): Promise<WithId<T>> {
    return this.#call('patchResource', resourceType, id, patch);
  }

  search<T extends Resource>(searchRequest: unknown): Promise<Bundle<WithId<T>>> {
    return this.#call('search', searchRequest);
  }

  searchByReference<T extends Resource>(searchRequest: unknown, referenceField: string, references: string[]): Promise<Record<string, WithId<T>[]>> {
    return this.#call('searchByReference', searchRequest, referenceField, references);
  }

  // Medplum's GraphQL resolvers never call these; a call would be a new Medplum release, refused rather than guessed.
  readHistory(): Promise<never> {
    return Promise.reject(new Error('readHistory is not forwarded to the host'));
  }

  readVersion(): Promise<never> {
    return Promise.reject(new Error('readVersion is not forwarded to the host'));
  }

  withTransaction(): Promise<never> {
    return Promise.reject(new Error('withTransaction is not forwarded to the host'));
  }
}

function routerFor(introspectionEnabled: boolean): FhirRouter {
  let router = routers.get(introspectionEnabled);
  if (!router) {
    router = new FhirRouter({ introspectionEnabled });
    routers.set(introspectionEnabled, router);
  }
  return router;
}

async function answer(request: Extract<ToWorker, { kind: 'request' }>): Promise<void> {
  const { id, query, operationName, variables, introspectionEnabled } = request;
  try {
    const [outcome, result] = await routerFor(introspectionEnabled).handleRequest(
      makeSimpleRequest('POST', '$graphql', { query, operationName, variables }),
      new ForwardedRepository(id),
    );
    // A result that cannot be cloned (none of Medplum's) fails here, and is answered as a failure below.
    send({ kind: 'response', id, outcome: outcome as OperationOutcome, ...(result === undefined ? {} : { result: serializeResult(result) }) });
  } catch (error) {
    send({ kind: 'failed', id, error: serializeError(error) });
  }
  if (!compactedAfterBuild) {
    compactedAfterBuild = true;
    compactHeap();
  }
}

/** An execution result as it crosses: graphql's errors become their JSON fields and their original error's outcome. */
function serializeResult(result: unknown): SerializedResult {
  if (typeof result !== 'object' || result === null || !('data' in result || 'errors' in result)) {
    return { hasData: false, other: result };
  }
  const { data, errors } = result as { data?: unknown; errors?: unknown };
  return {
    hasData: 'data' in result,
    ...('data' in result ? { data } : {}),
    ...(Array.isArray(errors) ? { errors: errors.map(serializeGraphqlError) } : {}),
  };
}

function serializeGraphqlError(error: unknown): SerializedGraphqlError {
  const fields = (typeof error === 'object' && error !== null ? error : {}) as {
    message?: unknown;
    locations?: SerializedGraphqlError['locations'];
    path?: SerializedGraphqlError['path'];
    extensions?: Record<string, unknown>;
    originalError?: unknown;
  };
  const original = fields.originalError === undefined || fields.originalError === null ? undefined : serializeError(fields.originalError);
  return {
    message: typeof fields.message === 'string' ? fields.message : String(error),
    ...(fields.locations ? { locations: fields.locations } : {}),
    ...(fields.path ? { path: fields.path } : {}),
    ...(fields.extensions && Object.keys(fields.extensions).length > 0 ? { extensions: fields.extensions } : {}),
    ...(original ? { original: original.outcome ? { outcome: original.outcome } : {} } : {}),
  };
}

process.on('message', (message: ToWorker) => {
  if (message.kind === 'request') {
    void answer(message);
    return;
  }
  const waiting = waitingCalls.get(message.callId);
  waitingCalls.delete(message.callId);
  if (message.error) {
    waiting?.reject(rebuildError(message.error));
  } else {
    waiting?.resolve(message.value);
  }
});
