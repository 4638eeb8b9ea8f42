/**
 * What the fast path leaves to Medplum's handler, and what it never relaxes: invalid documents are Medplum's to
 * answer (word for word, every time, never kept), introspection too, every request when Medplum's schema cannot
 * be read; the kept documents are bounded; and the caller's AccessPolicy decides on the fast path as on Medplum's.
 */
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import { FhirRouter, MemoryRepository, type FhirRequest } from '@medplum/fhir-router';
import type { Observation } from '@medplum/fhirtypes';
import { buildDevicePolicy } from '../devices/device-services.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { ProjectRepository } from '../hosts/standalone/project-repository.ts';
import { executeGraphql } from './execute-graphql.ts';
import { FastGraphqlPath } from './fast-graphql-path.ts';

/** A router whose handler calls are counted by document text. */
function countingRouter(): { router: FhirRouter; handled: string[] } {
  const router = new FhirRouter();
  const handled: string[] = [];
  const handleRequest = router.handleRequest.bind(router);
  jest.spyOn(router, 'handleRequest').mockImplementation((request: FhirRequest, repo) => {
    handled.push(String((request.body as { query?: unknown }).query));
    return handleRequest(request, repo);
  });
  return { router, handled };
}

describe('FastGraphqlPath: what stays with Medplum’s handler', () => {
  beforeAll(() => loadFhirDefinitions());

  test('a document that fails validation is answered by Medplum, in its words, every time, and never kept', async () => {
    const { router, handled } = countingRouter();
    const fastPath = new FastGraphqlPath(router);
    await fastPath.prepare();
    handled.length = 0;
    const repo = new MemoryRepository();
    const request = { query: '{ ObservationList { nonsense } }' };

    const medplum = await executeGraphql(router, repo, request);
    const first = await executeGraphql(router, repo, request, fastPath);
    const second = await executeGraphql(router, repo, request, fastPath);

    expect(first).toEqual(medplum);
    expect(second).toEqual(medplum);
    expect(second.errors?.[0]).toEqual({ message: 'Cannot query field "nonsense" on type "Observation".', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } });
    expect(handled).toEqual([request.query, request.query, request.query]);
    expect(fastPath.keptDocuments).toBe(0);
  }, 120_000);

  test('syntax errors and introspection are left to Medplum, however often they come', async () => {
    const { router, handled } = countingRouter();
    const fastPath = new FastGraphqlPath(router);
    await fastPath.prepare();
    const repo = new MemoryRepository();
    for (const query of ['{ Observation(id: "x") { id ', '{ __type(name: "Observation") { name } }', '{ __schema { queryType { name } } }']) {
      const medplum = await executeGraphql(router, repo, { query });
      handled.length = 0;
      expect(await executeGraphql(router, repo, { query }, fastPath)).toEqual(medplum);
      expect(await executeGraphql(router, repo, { query }, fastPath)).toEqual(medplum);
      expect(handled).toEqual([query, query]);
    }
    expect(fastPath.keptDocuments).toBe(0);
    expect((await executeGraphql(router, repo, { query: '{ __schema { queryType { name } } }' }, fastPath)).errors?.[0]?.extensions.code).toBe('FORBIDDEN');
  });

  test('at most maxDocuments documents are kept; one that was dropped goes to Medplum again, then is kept again', async () => {
    const { router, handled } = countingRouter();
    const fastPath = new FastGraphqlPath(router, { maxDocuments: 2 });
    await fastPath.prepare();
    const repo = new MemoryRepository();
    const queries = ['{ ObservationList { id } }', '{ ObservationList { status } }', '{ DeviceList { id } }'];
    for (const query of queries) {
      await executeGraphql(router, repo, { query }, fastPath);
    }
    expect(fastPath.keptDocuments).toBe(2);
    handled.length = 0;
    await executeGraphql(router, repo, { query: queries[2] }, fastPath); // kept
    await executeGraphql(router, repo, { query: queries[0] }, fastPath); // dropped first: Medplum's handler again
    await executeGraphql(router, repo, { query: queries[0] }, fastPath); // kept again
    expect(handled).toEqual([queries[0]]);
    expect(fastPath.keptDocuments).toBe(2);
  });

  test('when Medplum’s schema cannot be read, every request goes to Medplum’s handler and the reason is told once', async () => {
    const reasons: string[] = [];
    const router = new FhirRouter();
    const handleRequest = jest.spyOn(router, 'handleRequest').mockResolvedValue([{ resourceType: 'OperationOutcome', issue: [] }]);
    const unavailable = new FastGraphqlPath(router, { onUnavailable: (reason) => reasons.push(reason) });
    expect(await unavailable.prepare()).toBe(false);
    handleRequest.mockClear();
    await unavailable.execute(new MemoryRepository(), { query: '{ ObservationList { id } }' });
    await unavailable.execute(new MemoryRepository(), { query: '{ ObservationList { id } }' });
    expect(handleRequest).toHaveBeenCalledTimes(2);
    expect(unavailable.keptDocuments).toBe(0);
    expect(reasons).toEqual(["Medplum's GraphQL schema could not be read: every request is validated by Medplum"]);
  });
});

describe('FastGraphqlPath: the caller’s AccessPolicy decides on the fast path too', () => {
  const PROJECT = 'project-devices';
  const store = new MemoryRepository();
  const router = new FhirRouter();
  const fastPath = new FastGraphqlPath(router);
  const QUERY = 'mutation($res: ObservationCreate!) { ObservationCreate(res: $res) { id device { reference } } }';

  beforeAll(() => loadFhirDefinitions());

  function deviceRepo(deviceId: string): ProjectRepository {
    return new ProjectRepository(store, { projectId: PROJECT, author: { reference: `Device/${deviceId}` }, accessPolicy: buildDevicePolicy(deviceId) });
  }

  function observationOf(deviceId: string): Observation {
    return { resourceType: 'Observation', status: 'final', code: { text: 'pulse' }, device: { reference: `Device/${deviceId}` } };
  }

  test('a device may create its own Observations, never one for another device, however often it tries', async () => {
    const repo = deviceRepo('device-a');
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const own = await executeGraphql(router, repo, { query: QUERY, variables: { res: observationOf('device-a') } }, fastPath);
      expect(own.errors).toBeUndefined();
      expect(own.data?.ObservationCreate).toEqual({ id: expect.any(String), device: { reference: 'Device/device-a' } });

      const other = await executeGraphql(router, repo, { query: QUERY, variables: { res: observationOf('device-b') } }, fastPath);
      expect(other).toEqual({ data: { ObservationCreate: null }, errors: [expect.objectContaining({ extensions: { code: 'FORBIDDEN' } })] });
    }
    expect(fastPath.keptDocuments).toBe(1);
    const stored = await deviceRepo('device-b').searchResources<Observation>({ resourceType: 'Observation' });
    expect(stored).toEqual([]);
  }, 120_000);

  test('a device reads only what its policy lets it read, on the fast path as on Medplum’s', async () => {
    await deviceRepo('device-b').createResource(observationOf('device-b'));
    const query = { query: '{ ObservationList { device { reference } } }' };
    const medplum = await executeGraphql(router, deviceRepo('device-a'), query);
    await executeGraphql(router, deviceRepo('device-a'), query, fastPath);
    const fast = await executeGraphql(router, deviceRepo('device-a'), query, fastPath);
    expect(fast).toEqual(medplum);
    expect((fast.data?.ObservationList as unknown[]).length).toBeGreaterThan(0);
    expect(fast.data?.ObservationList).toEqual((fast.data?.ObservationList as unknown[]).map(() => ({ device: { reference: 'Device/device-a' } })));
  });
});
