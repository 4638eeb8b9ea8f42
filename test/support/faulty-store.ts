/**
 * A store that refuses writes on command, as a database does during an outage: the FHIR repository is wrapped so
 * that creates, updates, patches, deletes and transactions fail with a server error while a fault applies, or
 * are slow to be written while a delay applies. Everything else is the real store underneath.
 */
import { OperationOutcomeError, serverError } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Resource } from '@medplum/fhirtypes';

const WRITES = new Set(['createResource', 'updateResource', 'patchResource', 'deleteResource']);

/** Which writes fail: all, or those whose resource the predicate picks (creates and updates only). */
export type WriteFault = 'all' | ((resource: Resource) => boolean);

export interface FaultyStore {
  readonly repo: FhirRepository;
  /** Writes matching `fault` fail until `heal()`, or for the next `times` matching writes. */
  fail(fault: WriteFault, times?: number): void;
  heal(): void;
  /** Writes matching `fault` reach the store only `ms` later, until `heal()`: a store under load. */
  delay(fault: WriteFault, ms: number): void;
  /** Writes refused since the last `fail`. */
  readonly refused: number;
}

export function withWriteFaults<T extends FhirRepository>(store: T): FaultyStore & { readonly repo: T } {
  let fault: WriteFault | undefined;
  let remaining = Number.POSITIVE_INFINITY;
  let refused = 0;
  let slow: { fault: WriteFault; ms: number } | undefined;
  const refuses = (name: string, args: unknown[]): boolean => {
    if (!fault || remaining <= 0) {
      return false;
    }
    if (name === 'withTransaction' || WRITES.has(name)) {
      const resource = args[0];
      const hit = fault === 'all' || (typeof resource === 'object' && resource !== null && 'resourceType' in resource && fault(resource as Resource));
      if (hit) {
        remaining--;
        refused++;
      }
      return hit;
    }
    return false;
  };
  const delayOf = (name: string, args: unknown[]): number => {
    const resource = args[0];
    const hit = slow && WRITES.has(name) && (slow.fault === 'all' || (typeof resource === 'object' && resource !== null && 'resourceType' in resource && slow.fault(resource as Resource)));
    return hit && slow ? slow.ms : 0;
  };
  const repo = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') {
        return value;
      }
      return (...args: unknown[]) => {
        if (refuses(String(property), args)) {
          return Promise.reject(new OperationOutcomeError(serverError(new Error('The FHIR store could not complete the operation'))));
        }
        const ms = delayOf(String(property), args);
        if (ms > 0) {
          return new Promise((resolve) => setTimeout(resolve, ms)).then(() => value.apply(target, args));
        }
        return value.apply(target, args);
      };
    },
  });
  return {
    repo,
    fail: (next, times = Number.POSITIVE_INFINITY) => {
      fault = next;
      remaining = times;
      refused = 0;
    },
    delay: (next, ms) => {
      slow = { fault: next, ms };
    },
    heal: () => {
      fault = undefined;
      slow = undefined;
    },
    get refused() {
      return refused;
    },
  };
}
