import { beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import type { WithId } from '@medplum/core';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';
import type { Observation, Resource } from '@medplum/fhirtypes';
import { ReadOnlyRepository } from '../../test/support/graphql-engines.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { guardDeviceWrites, type DeviceCaller } from './device-write-guard.ts';
import { executeGraphql } from './execute-graphql.ts';
import { translateDocument } from './translate-document.ts';

const SYSTEM = 'urn:example:devices';
const device: DeviceCaller = { deviceId: 'device-001', deviceResourceId: 'dev-res-1', identifierSystem: SYSTEM };

const SPEC_MUTATION =
  'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { coding { system code } } device { identifier { system value } } } }';
const specVariables = {
  input: {
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    device: { identifier: { system: SYSTEM, value: 'device-001' } },
  },
};

/** A repository whose store fails with an internal message that must not reach the client. */
class BrokenRepository extends MemoryRepository {
  override async createResource<T extends Resource>(): Promise<WithId<T>> {
    throw new Error('connection to db-internal:5432 refused for user fhir_admin');
  }
}

describe('executeGraphql on Medplum’s engine', () => {
  const router = new FhirRouter();
  let repo: MemoryRepository;

  beforeAll(() => loadFhirDefinitions());

  beforeEach(() => {
    repo = new MemoryRepository();
  });

  test("the spec's device mutation creates an Observation linked to the Device and returns the spec's selection", async () => {
    const request = guardDeviceWrites(translateDocument({ query: SPEC_MUTATION, variables: specVariables }), device);
    const response = await executeGraphql(router, repo, request);
    expect(response.errors).toBeUndefined();
    const created = response.data?.ObservationCreate as { id: string };
    expect(created).toEqual({
      id: expect.any(String),
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      device: { identifier: { system: SYSTEM, value: 'device-001' } },
    });
    const stored = await repo.readResource<Observation>('Observation', created.id);
    expect(stored.device).toEqual({ reference: 'Device/dev-res-1', identifier: { system: SYSTEM, value: 'device-001' } });
  });

  test('a write the repository forbids is a FORBIDDEN GraphQL error, not a thrown failure', async () => {
    const request = guardDeviceWrites(translateDocument({ query: SPEC_MUTATION, variables: specVariables }), device);
    const response = await executeGraphql(router, new ReadOnlyRepository(), request);
    expect(response).toEqual({
      data: { ObservationCreate: null },
      errors: [{ message: 'Forbidden', locations: [{ line: 2, column: 3 }], path: ['ObservationCreate'], extensions: { code: 'FORBIDDEN' } }],
    });
  });

  test('a store failure is INTERNAL_SERVER_ERROR without its internal text', async () => {
    const request = translateDocument({ query: SPEC_MUTATION, variables: specVariables });
    const response = await executeGraphql(router, new BrokenRepository(), request);
    expect(response.errors).toEqual([expect.objectContaining({ message: 'The server could not complete the request.', extensions: { code: 'INTERNAL_SERVER_ERROR' } })]);
    expect(JSON.stringify(response)).not.toMatch(/db-internal|fhir_admin/);
  });

  test('a missing resource is NOT_FOUND; a wrong update id is BAD_REQUEST with Medplum’s reason', async () => {
    const missing = await executeGraphql(router, repo, { query: '{ Observation(id: "nope") { id } }' });
    expect(missing.errors?.[0]).toMatchObject({ message: 'Not found', path: ['Observation'], extensions: { code: 'NOT_FOUND' } });

    const update = translateDocument({
      query: 'mutation($input: ObservationInput!) { ObservationUpdate(id: "a", resource: $input) { id } }',
      variables: { input: { id: 'b', status: 'final', code: { text: 'x' } } },
    });
    const refused = await executeGraphql(router, repo, update);
    expect(refused.errors?.[0]).toMatchObject({ message: 'Invalid ID', extensions: { code: 'BAD_REQUEST' } });
  });

  test('an update in the spec dialect runs on Medplum’s engine', async () => {
    const existing = await repo.createResource<Observation>({ resourceType: 'Observation', status: 'preliminary', code: { text: 'pulse' } });
    const update = translateDocument({
      query: 'mutation($id: ID!, $input: ObservationInput!) { ObservationUpdate(id: $id, resource: $input) { id status } }',
      variables: { id: existing.id, input: { id: existing.id, status: 'final', code: { text: 'pulse' } } },
    });
    expect(await executeGraphql(router, repo, update)).toEqual({ data: { ObservationUpdate: { id: existing.id, status: 'final' } } });
  });

  test('schema errors are GRAPHQL_VALIDATION_FAILED; a variable of the wrong type is BAD_REQUEST', async () => {
    const invalid = await executeGraphql(router, repo, { query: '{ ObservationList { nonsense } }' });
    expect(invalid).toEqual({ errors: [{ message: 'Cannot query field "nonsense" on type "Observation".', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] });

    const wrongVariable = await executeGraphql(router, repo, { query: 'query($id: ID!) { Observation(id: $id) { id } }', variables: { id: { a: 1 } } });
    expect(wrongVariable.data).toBeUndefined();
    expect(wrongVariable.errors?.[0]).toMatchObject({ message: expect.stringMatching(/^Variable "\$id" has invalid value/), extensions: { code: 'BAD_REQUEST' } });
  });

  test('introspection is FORBIDDEN by Medplum unless its router enables it', async () => {
    const query = '{ __type(name: "ObservationCreate") { name } }';
    expect(await executeGraphql(router, repo, { query })).toEqual({ errors: [{ message: 'Forbidden', extensions: { code: 'FORBIDDEN' } }] });
    const open = new FhirRouter({ introspectionEnabled: true });
    expect(await executeGraphql(open, repo, { query })).toEqual({ data: { __type: { name: 'ObservationCreate' } } });
  });
});
