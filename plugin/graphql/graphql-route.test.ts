/**
 * The route's order with the fast path in place: fhirgate's document limits are checked before anything runs, on
 * every request (a cached document is never a way around them), and a document that passes runs the same way the
 * first and the hundredth time. Also what hosts may differ in: GraphQL answered off the host's event loop, a
 * partial engine whose schema cannot be read, no logger at all.
 */
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import { OperationOutcomeError, serverError } from '@medplum/core';
import { FhirRouter, MemoryRepository, makeSimpleRequest } from '@medplum/fhir-router';
import express from 'express';
import request from 'supertest';
import type { FhirgateHost, HostLogger, OffThreadGraphql } from '../host.ts';
import { graphqlRouteHost, PROJECT_ID } from '../../test/support/graphql-route-host.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { createGraphqlRoute } from './graphql-route.ts';


describe('POST /graphql with the fast path', () => {
  const repo = new MemoryRepository();
  const { caller, host } = graphqlRouteHost(repo);
  const app = express().use(createGraphqlRoute({ host, limits: { maxDepth: 3 }, body: { maxBytes: 100_000, maxDepth: 64 } }));
  // A server whose operator allows introspection (`graphql.allow_introspection`).
  const open = express().use(createGraphqlRoute({ host, limits: { maxDepth: 8, allowIntrospection: true }, body: { maxBytes: 100_000, maxDepth: 64 } }));

  beforeAll(() => loadFhirDefinitions());

  function post(query: string): request.Test {
    return request(app).post('/graphql').set('X-Project-ID', PROJECT_ID).send({ query });
  }

  test('a document over the limits is refused before it reaches the engine, every time', async () => {
    const search = jest.spyOn(repo, 'searchResources');
    const deep = '{ ObservationList { subject { resource { ... on Patient { link { other { id } } } } } } }';
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const response = await post(deep).expect(200);
      expect(response.body).toEqual({ errors: [{ message: expect.stringMatching(/nested too deeply/), extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] });
    }
    const introspection = await post('{ __schema { queryType { name } } }').expect(200);
    expect(introspection.body.errors[0].message).toBe('GraphQL introspection is disabled on this server.');
    expect(search).not.toHaveBeenCalled();
  }, 120_000);

  test('where the operator allows introspection, it is answered, the first and the later times', async () => {
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const response = await request(open).post('/graphql').set('X-Project-ID', PROJECT_ID).send({ query: '{ __schema { queryType { name } } }' }).expect(200);
      expect(response.body).toEqual({ data: { __schema: { queryType: { name: 'QueryType' } } } });
    }
  }, 120_000);

  test('where the operator allows introspection and the host answers GraphQL off its event loop, it is answered there', async () => {
    // As the standalone host's worker does: Medplum's `$graphql`, with the router option the request carries.
    const offThread: OffThreadGraphql = {
      handleRequest: async ({ query, operationName, variables, introspectionEnabled }, on) => {
        const [outcome, result] = await new FhirRouter({ introspectionEnabled }).handleRequest(makeSimpleRequest('POST', '$graphql', { query, operationName, variables }), on);
        return [outcome, result];
      },
    };
    const elsewhere = express().use(
      createGraphqlRoute({ host: { ...host, fhir: { ...host.fhir, offThreadGraphql: offThread } }, limits: { maxDepth: 8, allowIntrospection: true }, body: { maxBytes: 100_000, maxDepth: 64 } }),
    );
    const response = await request(elsewhere).post('/graphql').set('X-Project-ID', PROJECT_ID).send({ query: '{ __schema { queryType { name } } }' }).expect(200);
    expect(response.body).toEqual({ data: { __schema: { queryType: { name: 'QueryType' } } } });
  }, 120_000);

  test("a host whose partial engine's schema cannot be read: documents are answered all the same, and the operator is told once, at warn", async () => {
    const warnings: [string, Record<string, unknown> | undefined][] = [];
    const logger: HostLogger = { debug: () => undefined, info: () => undefined, warn: (message, fields) => warnings.push([message, fields]), error: () => undefined };
    const unreadable = (): FhirRouter => {
      const router = new FhirRouter();
      jest.spyOn(router, 'handleRequest').mockResolvedValue([serverError(new Error('no schema here'))]);
      return router;
    };
    const own = new MemoryRepository();
    const observation = await own.createResource({ resourceType: 'Observation', status: 'final', code: { text: 'temperature' } });
    const partialUnreadable = { ...host, authenticate: async () => ({ ...caller, repo: own }), fhir: { ...host.fhir, createPartialRouter: unreadable } } as FhirgateHost;
    // With a logger, and without one (the host port's logger is optional).
    for (const withLogger of [{ ...partialUnreadable, logger }, partialUnreadable]) {
      const route = express().use(createGraphqlRoute({ host: withLogger, limits: { maxDepth: 3 }, body: { maxBytes: 100_000, maxDepth: 64 } }));
      for (let attempt = 0; attempt < 2; attempt += 1) {
        const response = await request(route)
          .post('/graphql')
          .set('X-Project-ID', PROJECT_ID)
          .send({ query: 'query ($id: ID!) { Observation(id: $id) { status code { text } } }', variables: { id: observation.id } })
          .expect(200);
        expect(response.body).toEqual({ data: { Observation: { status: 'final', code: { text: 'temperature' } } } });
      }
    }
    expect(warnings).toEqual([['GraphQL fast path unavailable', { reason: "the partial engine's GraphQL schema could not be read: new documents wait for Medplum's whole schema" }]]);
  }, 120_000);

  test("a host with no logger whose authentication fails (its store down) answers a GraphQL error, not Express's page", async () => {
    const failing = { ...host, authenticate: () => Promise.reject(new OperationOutcomeError(serverError(new Error('the store is down')))) } as FhirgateHost;
    const route = express().use(createGraphqlRoute({ host: failing, limits: { maxDepth: 3 }, body: { maxBytes: 100_000, maxDepth: 64 } }));
    const response = await request(route).post('/graphql').set('X-Project-ID', PROJECT_ID).send({ query: '{ ObservationList { id } }' }).expect(500);
    expect(response.body).toEqual({ errors: [{ message: 'The server could not complete the request.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
  });

  test('a document within the limits answers the same the first and the later times', async () => {
    await repo.createResource({ resourceType: 'Observation', status: 'final', code: { text: 'pulse' } });
    const answers = [];
    for (let attempt = 0; attempt < 3; attempt += 1) {
      answers.push((await post('{ ObservationList { status code { text } } }').expect(200)).body);
    }
    expect(answers[0]).toEqual({ data: { ObservationList: [{ status: 'final', code: { text: 'pulse' } }] } });
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
  }, 120_000);
});
