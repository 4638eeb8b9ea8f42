/**
 * The route's order with the fast path in place: fhirgate's document limits are checked before anything runs, on
 * every request (a cached document is never a way around them), and a document that passes runs the same way the
 * first and the hundredth time.
 */
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import { isResourceType } from '@medplum/core';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';
import type { Login, Project, ProjectMembership } from '@medplum/fhirtypes';
import express from 'express';
import request from 'supertest';
import type { CallerContext, FhirgateHost } from '../host.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { createGraphqlRoute } from './graphql-route.ts';

const PROJECT_ID = 'project-1';

describe('POST /graphql with the fast path', () => {
  const repo = new MemoryRepository();
  const caller = {
    repo,
    project: { resourceType: 'Project', id: PROJECT_ID } as Project & { id: string },
    membership: { resourceType: 'ProjectMembership', id: 'm1' } as ProjectMembership & { id: string },
    profile: { reference: 'Practitioner/p1' },
    login: { resourceType: 'Login', id: 'l1' } as Login & { id: string },
  } as unknown as CallerContext;
  const host = {
    authenticate: async () => caller,
    fhir: { createRouter: (options: { introspectionEnabled: boolean }) => new FhirRouter(options), isResourceType },
  } as unknown as FhirgateHost;
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
