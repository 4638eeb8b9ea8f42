/**
 * A document Medplum's handler answers but whose schema the fast path cannot prune (a Medplum release whose schema
 * holds something the pruning does not know): it is still answered, every time, by Medplum's handler, and the
 * operator is told once per document, at debug, with the reason. The installed Medplum gives no such document, so
 * the pruning is made to fail here; everything else is the real route, engine and store.
 */
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import { MemoryRepository } from '@medplum/fhir-router';
import express from 'express';
import request from 'supertest';
import type { HostLogger } from '../host.ts';
import { graphqlRouteHost, PROJECT_ID } from '../../test/support/graphql-route-host.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';

const REASON = 'a type the pruning does not know';

jest.unstable_mockModule('./pruned-schema.ts', () => ({
  buildPrunedSchema: () => {
    throw new Error(REASON);
  },
}));
const { createGraphqlRoute } = await import('./graphql-route.ts');

describe('POST /graphql: a document whose schema cannot be pruned', () => {
  const repo = new MemoryRepository();
  const { host } = graphqlRouteHost(repo);

  beforeAll(async () => {
    loadFhirDefinitions();
    await repo.createResource({ resourceType: 'Observation', status: 'final', code: { text: 'pulse' } });
  });

  test("is answered by Medplum's handler every time, and said once per document at debug with the reason", async () => {
    const debug: [string, Record<string, unknown> | undefined][] = [];
    const logger: HostLogger = { debug: (message, fields) => debug.push([message, fields]), info: () => undefined, warn: () => undefined, error: () => undefined };
    const route = express().use(createGraphqlRoute({ host: { ...host, logger }, limits: { maxDepth: 3 }, body: { maxBytes: 100_000, maxDepth: 64 } }));
    for (const query of ['{ ObservationList { status } }', '{ ObservationList { status } }', '{ ObservationList { code { text } } }']) {
      const response = await request(route).post('/graphql').set('X-Project-ID', PROJECT_ID).send({ query }).expect(200);
      expect(response.body.data.ObservationList).toHaveLength(1);
    }
    expect(debug).toEqual([
      ["GraphQL document left to Medplum's handler", { reason: REASON }],
      ["GraphQL document left to Medplum's handler", { reason: REASON }],
    ]);
  }, 120_000);

  test('on a host with no logger, it is answered all the same', async () => {
    const route = express().use(createGraphqlRoute({ host, limits: { maxDepth: 3 }, body: { maxBytes: 100_000, maxDepth: 64 } }));
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const response = await request(route).post('/graphql').set('X-Project-ID', PROJECT_ID).send({ query: '{ ObservationList { status } }' }).expect(200);
      expect(response.body).toEqual({ data: { ObservationList: [{ status: 'final' }] } });
    }
  }, 120_000);
});
