/**
 * The GraphQL worker process answers exactly as Medplum's `$graphql` does in-process: each request is run on Medplum's
 * handler in this thread and in the worker, over the same repository of this thread (the worker forwards every
 * read and write to it), and the answers must be equal, raw and as `/graphql` renders them. The worker stops when
 * idle and starts again on the next request.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { WithId } from '@medplum/core';
import { FhirRouter, MemoryRepository, makeSimpleRequest, type FhirRepository } from '@medplum/fhir-router';
import type { Observation, Patient } from '@medplum/fhirtypes';
import { ReadOnlyRepository, withoutIds } from '../../../test/support/graphql-engines.ts';
import { waitFor } from '../../../test/support/wait-for.ts';
import { executeGraphql, type GraphqlExecutionRequest } from '../../graphql/execute-graphql.ts';
import { FastGraphqlPath } from '../../graphql/fast-graphql-path.ts';
import { loadFhirDefinitions } from './fhir-definitions.ts';
import { WorkerGraphqlEngine } from './off-thread-graphql.ts';

describe('WorkerGraphqlEngine: Medplum’s $graphql in a worker process, answering as in-process', () => {
  const router = new FhirRouter();
  const introspecting = new FhirRouter({ introspectionEnabled: true });
  const engine = new WorkerGraphqlEngine();
  const offThread = new FastGraphqlPath(router, { offThread: engine });
  const repo = new MemoryRepository();
  let patient: WithId<Patient>;
  let observation: WithId<Observation>;

  beforeAll(async () => {
    loadFhirDefinitions();
    patient = await repo.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Lopez', given: ['Maria'] }] });
    observation = await repo.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'pulse' },
      subject: { reference: `Patient/${patient.id}` },
      valueQuantity: { value: 72, unit: '/min' },
    });
  }, 300_000);

  afterAll(async () => {
    await engine.close();
  });

  /** Medplum's raw answer in this thread and in the worker, as JSON. */
  async function raw(request: GraphqlExecutionRequest, on: FhirRepository = repo, introspectionEnabled = false): Promise<{ here: unknown; worker: unknown }> {
    const { query, operationName, variables } = request;
    const here = await (introspectionEnabled ? introspecting : router).handleRequest(makeSimpleRequest('POST', '$graphql', { query, operationName, variables }), on);
    const worker = await engine.handleRequest({ query, operationName, variables, introspectionEnabled }, on);
    return { here: JSON.parse(JSON.stringify(here.slice(0, 2))), worker: JSON.parse(JSON.stringify(worker)) };
  }

  test.each<[string, GraphqlExecutionRequest]>([
    ['a search, its references followed', { query: '{ PatientList { id name { family given } } ObservationList { id subject { reference resource { ... on Patient { id } } } } }' }],
    ['a reverse lookup (searchByReference)', { query: '{ PatientList { id ObservationList(_reference: subject) { id valueQuantity { value } } } }' }],
    ['a connection with its count', { query: '{ ObservationConnection { count edges { resource { id } } } }' }],
    ['a read by id of a missing resource', { query: '{ Patient(id: "no-such-patient") { id } }' }],
    ['a field Medplum does not have', { query: '{ PatientList { nickname } }' }],
    ['a syntax error', { query: '{ PatientList { id }' }],
    ['a variable of the wrong type', { query: 'query ($count: Int) { PatientList(_count: $count) { id } }', variables: { count: 'many' } }],
    ['introspection, disabled', { query: '{ __schema { queryType { name } } }' }],
  ])('%s: the same answer', async (_name, request) => {
    const { here, worker } = await raw(request);
    expect(worker).toEqual(here);
  }, 300_000);

  test('introspection, enabled: the same answer', async () => {
    const { here, worker } = await raw({ query: '{ __schema { queryType { name } mutationType { name } } }' }, repo, true);
    expect(worker).toEqual(here);
    expect(worker).toEqual([expect.anything(), { data: { __schema: { queryType: { name: 'QueryType' }, mutationType: { name: 'MutationType' } } } }]);
  });

  test('a write the repository refuses: the same answer, and FORBIDDEN as /graphql renders it', async () => {
    const readOnly = new ReadOnlyRepository();
    const request = { query: 'mutation { PatientCreate(res: { resourceType: "Patient", name: [{ family: "X" }] }) { id } }' };
    const { here, worker } = await raw(request, readOnly);
    expect(worker).toEqual(here);
    const rendered = await executeGraphql(router, readOnly, request, offThread);
    expect(rendered).toEqual(await executeGraphql(router, readOnly, request));
    expect(rendered.errors?.map((error) => error.extensions.code)).toEqual(['FORBIDDEN']);
  });

  test('a write made in the worker is stored in the repository of this thread, as in-process', async () => {
    const request = { query: 'mutation ($res: ObservationCreate!) { ObservationCreate(res: $res) { id status code { text } } }', variables: { res: { resourceType: 'Observation', status: 'final', code: { text: 'weight' } } } };
    const worker = await executeGraphql(router, repo, request, offThread);
    const here = await executeGraphql(router, repo, request);
    expect(withoutIds(worker)).toEqual(withoutIds(here));
    const id = (worker.data?.ObservationCreate as { id: string }).id;
    expect(await repo.readResource<Observation>('Observation', id)).toMatchObject({ code: { text: 'weight' } });
  });

  test.each<[string, GraphqlExecutionRequest]>([
    ['a missing resource', { query: '{ Patient(id: "no-such-patient") { id } }' }],
    ['a validation error', { query: '{ PatientList { nickname } }' }],
    ['a variable of the wrong type', { query: 'query ($count: Int) { PatientList(_count: $count) { id } }', variables: { count: 'many' } }],
    ['a read of the Observation by id', { query: `{ Observation(id: "${'{id}'}") { id status } }` }],
  ])('%s, as /graphql renders it: the same', async (_name, request) => {
    const resolved = { ...request, query: request.query.replace('{id}', observation.id) };
    expect(await executeGraphql(router, repo, resolved, offThread)).toEqual(await executeGraphql(router, repo, resolved));
  });

  test('stops when idle, giving its schema back, and starts again on the next request', async () => {
    const idle = new WorkerGraphqlEngine({ idleMs: 200 });
    try {
      const first = await idle.handleRequest({ query: '{ PatientList { id } }', introspectionEnabled: false }, repo);
      expect(idle.running).toBe(true);
      await waitFor(async () => (idle.running ? undefined : true), 10_000);
      const again = await idle.handleRequest({ query: '{ PatientList { id } }', introspectionEnabled: false }, repo);
      expect(JSON.stringify(again)).toEqual(JSON.stringify(first));
    } finally {
      await idle.close();
    }
  }, 300_000);

  test('closed: a request still in it fails, and later ones are refused', async () => {
    const closing = new WorkerGraphqlEngine();
    const pending = expect(closing.handleRequest({ query: '{ PatientList { id } }', introspectionEnabled: false }, repo)).rejects.toThrow('the GraphQL worker stopped');
    await closing.close();
    await pending;
    await expect(closing.handleRequest({ query: '{ __typename }', introspectionEnabled: false }, repo)).rejects.toThrow('closed');
  });
});
