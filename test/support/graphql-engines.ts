/** What the tests that compare fhirgate's GraphQL paths with Medplum's `$graphql` handler share. */
import { OperationOutcomeError, forbidden, type WithId } from '@medplum/core';
import { MemoryRepository } from '@medplum/fhir-router';
import type { Resource } from '@medplum/fhirtypes';

/** A repository whose writes the AccessPolicy refuses, as Medplum's Repository refuses them. */
export class ReadOnlyRepository extends MemoryRepository {
  override async createResource<T extends Resource>(): Promise<WithId<T>> {
    throw new OperationOutcomeError(forbidden);
  }
}

/** A response or resource without `id` and `meta`, which differ between two creates; everything else must not. */
export function withoutIds(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value), (key, inner: unknown) => (key === 'id' || key === 'meta' ? undefined : inner)) as unknown;
}

/** A create with an inline input and variables of nested input types, a list of them included (Medplum's dialect). */
export const NESTED_INPUT_CREATE = {
  query:
    'mutation($code: CodeableConceptCreate!, $components: [ObservationComponentCreate!]) { ObservationCreate(res: { resourceType: "Observation", ' +
    'status: "final", code: $code, component: $components, subject: { reference: "Patient/p" } }) { status code { coding { code } } component { code { text } valueQuantity { value } } subject { reference } } }',
  variables: { code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] }, components: [{ code: { text: 'systolic' }, valueQuantity: { value: 120 } }] },
};
