/**
 * Reads Medplum's GraphQL schema object out of its `$graphql` handler, which keeps it private. One read,
 * `{ Observation(id: "…") { resourceType } }`, on a throwaway in-memory repository whose only answer is an
 * Observation with a function as `resourceType`: that field has no resolver of its own, so graphql's default
 * resolver calls the function with the resolve info, and the info carries the schema. No caller, repository or
 * stored data is involved. If a Medplum release resolves differently, nothing is captured and fhirgate keeps using
 * Medplum's handler alone (`fast-graphql-path.test.ts` pins the behaviour of the installed version).
 */
import type { OperationOutcomeError } from '@medplum/core';
import { MemoryRepository, makeSimpleRequest, type FhirRouter } from '@medplum/fhir-router';
import type { Reference, Resource } from '@medplum/fhirtypes';
import { isForeignSchema, type ForeignSchema } from './foreign-schema.ts';

const CAPTURE_QUERY = '{ Observation(id: "fhirgate-schema-capture") { resourceType } }';

/** Medplum's schema (built now if it was not yet), or undefined when it could not be read. */
export async function captureMedplumSchema(router: FhirRouter): Promise<ForeignSchema | undefined> {
  let captured: unknown;
  const capture = (_args: unknown, _context: unknown, info: unknown): string => {
    captured = typeof info === 'object' && info !== null ? (info as { schema?: unknown }).schema : undefined;
    return 'Observation';
  };
  await router.handleRequest(makeSimpleRequest('POST', '$graphql', { query: CAPTURE_QUERY }), new CaptureRepository(capture));
  return isForeignSchema(captured) ? captured : undefined;
}

/** Answers every reference with one resource whose `resourceType` is the capturing function. */
class CaptureRepository extends MemoryRepository {
  readonly #capture: (args: unknown, context: unknown, info: unknown) => string;

  constructor(capture: (args: unknown, context: unknown, info: unknown) => string) {
    super();
    this.#capture = capture;
  }

  override async readReferences<T extends Resource>(references: readonly Reference<T>[]): Promise<(T | OperationOutcomeError)[]> {
    return references.map(() => ({ id: 'fhirgate-schema-capture', resourceType: this.#capture }) as unknown as T);
  }
}
