/**
 * For the store's search tests: an in-memory store opened for each test, and readings (Observations) of a patient an
 * hour apart, so that a chart's newest page is a known slice.
 */
import { jest } from '@jest/globals';
import type { Observation } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../../plugin/hosts/standalone/fhir-definitions.ts';
import { SqliteRepository } from '../../plugin/hosts/standalone/store/sqlite-repository.ts';

/** A reading of `subject` (none: about no one) taken `hour` hours into 2025, in project-a; two codes in turn. */
export function reading(subject: string | undefined, hour: number): Observation {
  return {
    resourceType: 'Observation',
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: hour % 2 === 0 ? '8867-4' : '8480-6' }] },
    ...(subject ? { subject: { reference: subject } } : {}),
    effectiveDateTime: new Date(Date.UTC(2025, 0, 1) + hour * 3600_000).toISOString(),
    meta: { project: 'project-a' },
  };
}

/** Opens an in-memory store before each test and closes it after (mocks restored); returns the current one. */
export function inMemoryStoreForEachTest(): () => SqliteRepository {
  let repository: SqliteRepository | undefined;
  beforeAll(() => loadFhirDefinitions());
  beforeEach(() => {
    repository = SqliteRepository.open(':memory:');
  });
  afterEach(() => {
    jest.restoreAllMocks();
    repository?.close();
  });
  return () => {
    if (!repository) throw new Error('No store outside a test');
    return repository;
  };
}
