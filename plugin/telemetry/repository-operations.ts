/**
 * The FHIR repository operations a chat turn asks of the host: reads, searches and writes, counted where fhirgate
 * calls the host's repositories (the caller's, the project's system repository, the AI agent's). Inside a Medplum
 * server each one costs quota points and database round trips, so the count is what a turn costs the server,
 * whatever server it is: the request's log line and span carry it (`fhirReads`, `fhirSearches`, `fhirWrites`), the
 * `fhirgate.chat.repository_operations` metric sums it, and with the `reportRepositoryOperations` option a
 * non-streaming answer carries it in a header, so a client (the e2e suite, the bench) can read it from the outside.
 * Work the host does on its own (authenticating the token, Medplum's own caching) is not counted here.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { FhirRepository } from '@medplum/fhir-router';
import type { FhirgateHost } from '../host.ts';

/** The header of a non-streaming chat answer with the turn's counts (with `reportRepositoryOperations`). */
export const REPOSITORY_OPERATIONS_HEADER = 'X-Fhirgate-Repository-Operations';

/** One turn's operations so far. */
export class RepositoryOperations {
  reads = 0;
  searches = 0;
  writes = 0;

  /** The header's value, e.g. `reads=0; searches=1; writes=2`. */
  toHeader(): string {
    return `reads=${this.reads}; searches=${this.searches}; writes=${this.writes}`;
  }
}

type Kind = 'reads' | 'searches' | 'writes';

/**
 * What each `FhirRepository` method counts as. A batch read counts once per reference (a server reads each);
 * `conditionalCreate` is a search, and a write when it creates. Methods not named here (`generateId`,
 * `canPerformInteraction`, ...) ask the store nothing.
 */
const KINDS: Readonly<Record<string, Kind>> = {
  readResource: 'reads',
  readReference: 'reads',
  readVersion: 'reads',
  readHistory: 'reads',
  search: 'searches',
  searchResources: 'searches',
  searchOne: 'searches',
  searchByReference: 'searches',
  conditionalCreate: 'searches',
  conditionalUpdate: 'searches',
  createResource: 'writes',
  updateResource: 'writes',
  patchResource: 'writes',
  deleteResource: 'writes',
};

const current = new AsyncLocalStorage<RepositoryOperations>();

/** Runs `work` with `operations` counting every repository call made on its behalf (awaited calls included). */
export function countingOperations<T>(operations: RepositoryOperations, work: () => T): T {
  return current.run(operations, work);
}

/**
 * The host, with every repository it hands out counting into the current turn's {@link RepositoryOperations}; a
 * call outside a counted turn (start-up, the outbox's background drain) counts nowhere.
 */
export function countingRepositoryOperations(host: FhirgateHost): FhirgateHost {
  return {
    ...host,
    authenticate: async (request) => {
      const caller = await host.authenticate(request);
      return caller && { ...caller, repo: counted(caller.repo) };
    },
    getSystemRepo: async (projectId) => counted(await host.getSystemRepo(projectId)),
    getDeviceRepo: async (projectId, accessPolicy, device) => counted(await host.getDeviceRepo(projectId, accessPolicy, device)),
  };
}

/**
 * A view of `repo` whose methods count before they run. The methods run on the repository itself, so calls it
 * makes internally (a `searchResources` that calls `search`) are not counted twice; every other property (a
 * server's own methods, found by shape) passes through.
 */
function counted(repo: FhirRepository): FhirRepository {
  const wrappers = new Map<PropertyKey, unknown>();
  return new Proxy(repo, {
    get(target, property) {
      // A method already wrapped is answered from the map: a repository's methods are its class's, never replaced.
      const known = wrappers.get(property);
      if (known !== undefined) {
        return known;
      }
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function' || typeof property !== 'string') {
        return value;
      }
      const method = value as (...args: unknown[]) => unknown;
      const wrapper = (...args: unknown[]): unknown => {
        const operations = current.getStore();
        const result = method.apply(target, args);
        if (operations) {
          count(operations, property, args, result);
        }
        return result;
      };
      wrappers.set(property, wrapper);
      return wrapper;
    },
  });
}

function count(operations: RepositoryOperations, method: string, args: readonly unknown[], result: unknown): void {
  if (method === 'readReferences') {
    operations.reads += Array.isArray(args[0]) ? args[0].length : 0;
    return;
  }
  const kind = KINDS[method];
  if (kind) {
    operations[kind] += 1;
  }
  if (method === 'conditionalCreate' && result instanceof Promise) {
    // Medplum's outcome of a create that happened is `created`; an existing match is `allOk`.
    result.then(
      (answer: { outcome?: { id?: string } }) => {
        if (answer?.outcome?.id === 'created') {
          operations.writes += 1;
        }
      },
      () => undefined
    );
  }
}
