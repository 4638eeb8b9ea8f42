/**
 * The fast path answers exactly as Medplum's `$graphql` does: each request is run on Medplum's handler alone and
 * on the fast path, whose first run of a document is Medplum's handler and whose later runs use the document's
 * pruned schema; the later answers must equal Medplum's.
 */
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import type { WithId } from '@medplum/core';
import { FhirRouter, MemoryRepository, RepositoryMode, type FhirRequest } from '@medplum/fhir-router';
import type { Device, Observation, Patient } from '@medplum/fhirtypes';
import { NESTED_INPUT_CREATE, ReadOnlyRepository, withoutIds } from '../../test/support/graphql-engines.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { guardDeviceWrites, type DeviceCaller } from './device-write-guard.ts';
import { executeGraphql, type GraphqlExecutionRequest } from './execute-graphql.ts';
import { FastGraphqlPath } from './fast-graphql-path.ts';
import type { GraphqlResponse } from './graphql-response.ts';
import { translateDocument } from './translate-document.ts';

const SYSTEM = 'urn:example:devices';

describe('FastGraphqlPath: answers exactly as Medplum’s $graphql', () => {
  const router = new FhirRouter();
  const handled: string[] = [];
  const fastPath = new FastGraphqlPath(router, { onUnsupportedDocument: (reason) => unsupported.push(reason) });
  const unsupported: string[] = [];
  const repo = new MemoryRepository();
  let device: WithId<Device>;
  let patient: WithId<Patient>;
  let observation: WithId<Observation>;

  beforeAll(async () => {
    loadFhirDefinitions();
    const handleRequest = router.handleRequest.bind(router);
    jest.spyOn(router, 'handleRequest').mockImplementation((request: FhirRequest, on) => {
      handled.push(String((request.body as { query?: unknown }).query));
      return handleRequest(request, on);
    });
    expect(await fastPath.prepare()).toBe(true);
    device = await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'device-001' }] });
    patient = await repo.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Doe', given: ['Jo'] }] });
    observation = await repo.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'pulse', coding: [{ system: 'http://loinc.org', code: '8867-4' }, { system: 'urn:other', code: 'p' }] },
      device: { reference: `Device/${device.id}` },
      subject: { reference: `Patient/${patient.id}` },
      valueQuantity: { value: 72, unit: 'beats/minute' },
    });
  }, 120_000);

  /** Medplum's answer, and the fast path's answer once it keeps the document (its first run was Medplum's). */
  async function both(request: GraphqlExecutionRequest, on: MemoryRepository = repo): Promise<{ medplum: GraphqlResponse; fast: GraphqlResponse }> {
    const medplum = await executeGraphql(router, on, request);
    await executeGraphql(router, on, request, fastPath);
    handled.length = 0;
    const fast = await executeGraphql(router, on, request, fastPath);
    expect(handled).toEqual([]); // the second run was the fast path's own
    return { medplum, fast };
  }

  test("the device's mutation: the same response and the same stored Observation; Medplum's handler runs it once", async () => {
    const caller: DeviceCaller = { deviceId: 'device-001', deviceResourceId: device.id, identifierSystem: SYSTEM };
    const request = guardDeviceWrites(
      translateDocument({
        query:
          'mutation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { text coding { system code } } ' +
          'valueQuantity { value unit } device { reference identifier { system value } } } }',
        variables: { input: { status: 'final', code: { text: 'pulse' }, valueQuantity: { value: 70, unit: 'bpm' }, device: { identifier: { system: SYSTEM, value: 'device-001' } } } },
      }),
      caller,
    );
    const { medplum, fast } = await both(request);
    await executeGraphql(router, repo, request, fastPath);
    expect(handled).toEqual([]);

    expect(fast.errors).toBeUndefined();
    expect(withoutIds(fast)).toEqual(withoutIds(medplum));
    const read = (response: GraphqlResponse): Promise<Observation> =>
      repo.readResource<Observation>('Observation', (response.data?.ObservationCreate as { id: string }).id);
    expect(withoutIds(await read(fast))).toEqual(withoutIds(await read(medplum)));
    expect(unsupported).toEqual([]);
  });

  test('a create with inline input and variables of nested input types (a list of them included)', async () => {
    const { medplum, fast } = await both(NESTED_INPUT_CREATE);
    expect(fast.errors).toBeUndefined();
    expect(withoutIds(fast)).toEqual(withoutIds(medplum));
  });

  test.each<[string, () => GraphqlExecutionRequest]>([
    [
      'a read with a variable, a fragment and a reference resource selected with an inline fragment',
      () => ({
        query:
          'query Read($id: ID!) { Observation(id: $id) { ...Basics device { reference resource { __typename ... on Device { id status identifier { value } } } } } } ' +
          'fragment Basics on Observation { id status code { text coding(_count: 1) { code } } valueQuantity { value unit } }',
        variables: { id: observation.id },
      }),
    ],
    [
      'a reference that resolves to a type the document does not name',
      () => ({ query: `{ Observation(id: "${observation.id}") { subject { resource { __typename ... on Device { id } } } } }` }),
    ],
    ['the same type reached twice, with different fields merged', () => ({ query: `{ Observation(id: "${observation.id}") { subject { reference } device { display resource { ... on Device { status } } } } }` })],
    ['a search with a list argument', () => ({ query: `{ ObservationList(device: "Device/${device.id}") { id code { coding(system: "urn:other") { code } } } }` })],
    ['the connection API', () => ({ query: '{ ObservationConnection(_count: 5) { count edges { resource { id status } } } }' })],
    ['a reverse lookup', () => ({ query: `{ Device(id: "${device.id}") { id ObservationList(_reference: device) { id status } } }` })],
    ['only __typename', () => ({ query: '{ __typename }' })],
    ['@include and @skip', () => ({ query: `query($yes: Boolean!) { Patient(id: "${patient.id}") { id @skip(if: $yes) name @include(if: $yes) { family given } } }`, variables: { yes: true } })],
    ['a missing resource (NOT_FOUND)', () => ({ query: '{ Observation(id: "nope") { id } }' })],
    ['a variable of the wrong type (BAD_REQUEST)', () => ({ query: 'query($id: ID!) { Observation(id: $id) { id } }', variables: { id: { a: 1 } } })],
    [
      'an update with a wrong id (Medplum’s reason)',
      () => translateDocument({ query: 'mutation($r: ObservationInput!) { ObservationUpdate(id: "a", resource: $r) { id } }', variables: { r: { id: 'b', status: 'final', code: { text: 'x' } } } }),
    ],
    ['two operations, one chosen', () => ({ query: `query A { Device(id: "${device.id}") { id } } mutation B { ObservationDelete(id: "none") { id } }`, operationName: 'A' })],
  ])('%s', async (_name, request) => {
    const { medplum, fast } = await both(request());
    expect(fast).toEqual(medplum);
    expect(fast.data ?? fast.errors).toBeTruthy();
  });

  test('the type the document does not name is the one Medplum resolves to', async () => {
    const { fast } = await both({ query: `{ Observation(id: "${observation.id}") { subject { resource { __typename ... on Device { id } } } } }` });
    expect(fast).toEqual({ data: { Observation: { subject: { resource: { __typename: 'Patient' } } } } });
  });

  test('an input the variable coercion refuses (an unknown nested field) is refused in the same words', async () => {
    const query = 'mutation($res: ObservationCreate!) { ObservationCreate(res: $res) { id } }';
    const good = { resourceType: 'Observation', status: 'final', code: { text: 'x' } };
    await executeGraphql(router, repo, { query, variables: { res: good } }, fastPath); // Medplum's handler; kept
    const bad = { query, variables: { res: { ...good, code: { text: 'x', coding: [{ code: 'a', bogus: true }] } } } };
    const medplum = await executeGraphql(router, repo, bad);
    handled.length = 0;
    const fast = await executeGraphql(router, repo, bad, fastPath);
    expect(handled).toEqual([]);
    expect(fast).toEqual(medplum);
    expect(fast.errors?.[0]?.message).toMatch(/bogus/);
  });

  test('a write the repository forbids is the same FORBIDDEN error', async () => {
    const request = translateDocument({ query: 'mutation { ObservationCreate(resource: { status: "final", code: { text: "x" } }) { id } }' });
    const { medplum, fast } = await both(request, new ReadOnlyRepository());
    expect(fast).toEqual(medplum);
    expect(fast.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
  });

  test('every valid document of these tests was kept with its pruned schema', () => {
    expect(unsupported).toEqual([]);
    expect(fastPath.keptDocuments).toBeGreaterThan(15);
  });

  test('a query puts the repository in reader mode, as Medplum does; a mutation does not', async () => {
    const reader = new MemoryRepository();
    const setMode = jest.spyOn(reader, 'setMode');
    const query = { query: '{ ObservationList { id } }' };
    await executeGraphql(router, reader, query, fastPath);
    setMode.mockClear();
    await executeGraphql(router, reader, query, fastPath);
    expect(setMode).toHaveBeenCalledWith(RepositoryMode.READER);
    const mutation = translateDocument({ query: 'mutation { ObservationCreate(resource: { status: "final", code: { text: "x" } }) { id } }' });
    await executeGraphql(router, reader, mutation, fastPath);
    setMode.mockClear();
    await executeGraphql(router, reader, mutation, fastPath);
    expect(setMode).not.toHaveBeenCalled();
  });
});
