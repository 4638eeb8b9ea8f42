/**
 * A store whose reads of one resource type a test can watch or fail. A device's request to `/graphql` reads its
 * Device first thing after its token and its rate limit are checked: `nextRead('Device')` tells the test that a
 * request got that far, and `fail('Device', error)` fails it there, as the store fails a read it cannot complete.
 * Everything else is the real store underneath.
 */
import type { FhirRepository } from '@medplum/fhir-router';

/** The wrapped store and its controls. */
export interface WatchedReads<T extends FhirRepository> {
  readonly repo: T;
  /** Reads of `resourceType` reject with `error` until `heal()`. */
  fail(resourceType: string, error: Error): void;
  heal(): void;
  /** Resolves when the next read of `resourceType` starts. */
  nextRead(resourceType: string): Promise<void>;
}

export function withWatchedReads<T extends FhirRepository>(store: T): WatchedReads<T> {
  const failures = new Map<string, Error>();
  const waiting = new Map<string, (() => void)[]>();
  const read = (target: T, resourceType: string, id: string): Promise<unknown> => {
    const waiters = waiting.get(resourceType) ?? [];
    waiting.delete(resourceType);
    waiters.forEach((resolve) => resolve());
    const failure = failures.get(resourceType);
    return failure ? Promise.reject(failure) : target.readResource(resourceType, id);
  };
  const repo = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') {
        return value;
      }
      if (property === 'readResource') {
        return (resourceType: string, id: string) => read(target, resourceType, id);
      }
      return (...args: unknown[]) => value.apply(target, args);
    },
  });
  return {
    repo,
    fail: (resourceType, error) => {
      failures.set(resourceType, error);
    },
    heal: () => failures.clear(),
    nextRead: (resourceType) =>
      new Promise((resolve) => {
        waiting.set(resourceType, [...(waiting.get(resourceType) ?? []), resolve]);
      }),
  };
}
