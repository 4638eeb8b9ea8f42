/**
 * With a partial engine (the standalone host's, over Observation), documents about Observations are answered from
 * its schema the first time they are seen, without Medplum's handler and its whole schema, and the answer is the
 * one Medplum's handler gives on its whole schema. Documents that need more (another resource type, a reference's
 * `resource`, a `fhirpath` argument, anything invalid) are Medplum's handler's, as without a partial engine.
 */
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import type { WithId } from '@medplum/core';
import { FhirRouter, MemoryRepository, type FhirRequest } from '@medplum/fhir-router';
import type { Device, Observation, Patient } from '@medplum/fhirtypes';
import { NESTED_INPUT_CREATE, ReadOnlyRepository, withoutIds } from '../../test/support/graphql-engines.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { createPartialRouter } from '../hosts/standalone/partial-fhir-engine.ts';
import { guardDeviceWrites, type DeviceCaller } from './device-write-guard.ts';
import { executeGraphql, type GraphqlExecutionRequest } from './execute-graphql.ts';
import { FastGraphqlPath } from './fast-graphql-path.ts';
import type { GraphqlResponse } from './graphql-response.ts';
import { translateDocument } from './translate-document.ts';

const SYSTEM = 'urn:example:devices';

describe('FastGraphqlPath with a partial engine', () => {
  const router = new FhirRouter();
  const toMedplum: string[] = [];
  const repo = new MemoryRepository();
  let fastPath: FastGraphqlPath;
  let device: WithId<Device>;
  let patient: WithId<Patient>;
  let observation: WithId<Observation>;

  beforeAll(async () => {
    loadFhirDefinitions();
    fastPath = new FastGraphqlPath(router, { partialRouter: createPartialRouter(['Observation']) });
    const handleRequest = router.handleRequest.bind(router);
    jest.spyOn(router, 'handleRequest').mockImplementation((request: FhirRequest, on) => {
      toMedplum.push(String((request.body as { query?: unknown }).query));
      return handleRequest(request, on);
    });
    device = await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'device-001' }] });
    patient = await repo.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Doe', given: ['Jo'] }] });
    observation = await repo.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'pulse', coding: [{ system: 'http://loinc.org', code: '8867-4' }, { system: 'urn:other', code: 'p' }] },
      device: { reference: `Device/${device.id}` },
      subject: { reference: `Patient/${patient.id}` },
      hasMember: [{ reference: 'Observation/other' }],
      valueQuantity: { value: 72, unit: 'beats/minute' },
    });
  }, 120_000);

  /** The fast path's answer to a document it has not seen, which must not reach Medplum's handler; then Medplum's. */
  async function fromPartialThenMedplum(request: GraphqlExecutionRequest, on: MemoryRepository = repo): Promise<{ partial: GraphqlResponse; medplum: GraphqlResponse }> {
    toMedplum.length = 0;
    const partial = await executeGraphql(router, on, request, fastPath);
    expect(toMedplum).toEqual([]);
    // Kept: the next time it runs again without Medplum's handler.
    await executeGraphql(router, on, request, fastPath);
    expect(toMedplum).toEqual([]);
    const medplum = await executeGraphql(router, on, request);
    return { partial, medplum };
  }

  test("the spec's device mutation: the same response and the same stored Observation, Medplum's handler never asked", async () => {
    const caller: DeviceCaller = { deviceId: 'device-001', deviceResourceId: device.id, identifierSystem: SYSTEM };
    const request = guardDeviceWrites(
      translateDocument({
        query:
          'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { coding { system code } } ' +
          'device { identifier { system value } } } }',
        variables: { input: { status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] }, device: { identifier: { system: SYSTEM, value: 'device-001' } } } },
      }),
      caller,
    );
    const { partial, medplum } = await fromPartialThenMedplum(request);

    expect(partial.errors).toBeUndefined();
    expect(partial.data?.ObservationCreate).toEqual({
      id: expect.any(String),
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      device: { identifier: { system: SYSTEM, value: 'device-001' } },
    });
    expect(withoutIds(partial)).toEqual(withoutIds(medplum));
    const read = (response: GraphqlResponse): Promise<Observation> =>
      repo.readResource<Observation>('Observation', (response.data?.ObservationCreate as { id: string }).id);
    const stored = await read(partial);
    expect(stored.device).toEqual({ reference: `Device/${device.id}`, identifier: { system: SYSTEM, value: 'device-001' } });
    expect(withoutIds(stored)).toEqual(withoutIds(await read(medplum)));
  });

  test.each<[string, () => GraphqlExecutionRequest]>([
    ['a create with inline input and variables of nested input types', () => NESTED_INPUT_CREATE],
    [
      'a search with a variable, a fragment and list arguments',
      () => ({
        query:
          'query Read($id: String) { ObservationList(_id: $id) { ...Basics device { reference } } } ' +
          'fragment Basics on Observation { id status code { text coding(_count: 1) { code } other: coding(system: "urn:other") { code } } valueQuantity { value unit } }',
        variables: { id: observation.id },
      }),
    ],
    ['a search by reference, sorted', () => ({ query: `{ ObservationList(device: "Device/${device.id}", _sort: "-_lastUpdated") { id status } }` })],
    ['the connection API', () => ({ query: '{ ObservationConnection(_count: 5) { count edges { resource { id status } } } }' })],
    ['a reverse lookup from Observation to Observation', () => ({ query: `{ ObservationList(_id: "${observation.id}") { id ObservationList(_reference: has_member) { id } } }` })],
    ['only __typename', () => ({ query: '{ __typename }' })],
    ['@include and @skip', () => ({ query: `query($yes: Boolean!) { ObservationList(_id: "${observation.id}") { id @skip(if: $yes) status @include(if: $yes) } }`, variables: { yes: true } })],
    ['a variable of the wrong type (BAD_REQUEST)', () => ({ query: 'query($id: String) { ObservationList(_id: $id) { id } }', variables: { id: { a: 1 } } })],
    [
      'an update with a wrong id (Medplum’s reason)',
      () => translateDocument({ query: 'mutation($r: ObservationInput!) { ObservationUpdate(id: "a", resource: $r) { id } }', variables: { r: { id: 'b', status: 'final', code: { text: 'x' } } } }),
    ],
    ['a delete of nothing', () => ({ query: 'mutation { ObservationDelete(id: "none") { id } }' })],
    ['two operations, one chosen', () => ({ query: `query A { ObservationList(_id: "${observation.id}") { id } } mutation B { ObservationDelete(id: "none") { id } }`, operationName: 'A' })],
  ])('%s: from the partial schema, as Medplum answers it', async (_name, request) => {
    const { partial, medplum } = await fromPartialThenMedplum(request());
    expect(withoutIds(partial)).toEqual(withoutIds(medplum));
    expect(partial.data ?? partial.errors).toBeTruthy();
  });

  test('a write the repository forbids is the same FORBIDDEN error', async () => {
    const request = translateDocument({ query: 'mutation { ObservationCreate(resource: { status: "final", code: { text: "y" } }) { id status } }' });
    const { partial, medplum } = await fromPartialThenMedplum(request, new ReadOnlyRepository());
    expect(partial).toEqual(medplum);
    expect(partial.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
  });

  test.each<[string, () => GraphqlExecutionRequest]>([
    ['another resource type', () => ({ query: `{ PatientList(_id: "${patient.id}") { id name { family } } }` })],
    ['a read by id', () => ({ query: `{ Observation(id: "${observation.id}") { id status } }` })],
    ['a read by id of a missing resource (NOT_FOUND)', () => ({ query: '{ Observation(id: "nope") { id } }' })],
    ["a reference's resource (a union Medplum resolves by the reference)", () => ({ query: `{ ObservationList(_id: "${observation.id}") { subject { resource { __typename ... on Patient { id } } } } }` })],
    ['a fhirpath argument', () => ({ query: `{ ObservationList(_id: "${observation.id}") { code { coding(fhirpath: "system = 'urn:other'") { code } } } }` })],
    ['a missing required argument', () => ({ query: 'mutation { ObservationDelete { id } }' })],
    ['an unknown field', () => ({ query: '{ ObservationList { id bogus } }' })],
    ['a literal of the wrong type', () => ({ query: 'mutation { ObservationCreate(res: { resourceType: "Observation", status: 5 }) { id } }' })],
    ['a syntax error', () => ({ query: '{ ObservationList { id ' })],
  ])('%s: Medplum’s handler answers, as without a partial engine', async (_name, request) => {
    toMedplum.length = 0;
    const fast = await executeGraphql(router, repo, request(), fastPath);
    expect(toMedplum).toContain(request().query);
    expect(withoutIds(fast)).toEqual(withoutIds(await executeGraphql(router, repo, request())));
  });
});
