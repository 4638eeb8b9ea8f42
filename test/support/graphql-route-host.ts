/**
 * The least host `/graphql` needs, for the route's own tests: every request is one practitioner's of `PROJECT_ID`,
 * reading and writing `repo`, on Medplum's own GraphQL engine.
 */
import { isResourceType } from '@medplum/core';
import { FhirRouter, type MemoryRepository } from '@medplum/fhir-router';
import type { Login, Project, ProjectMembership } from '@medplum/fhirtypes';
import type { CallerContext, FhirgateHost } from '../../plugin/host.ts';

export const PROJECT_ID = 'project-1';

/** The caller every request authenticates as, and the host that gives it. */
export function graphqlRouteHost(repo: MemoryRepository): { readonly caller: CallerContext; readonly host: FhirgateHost } {
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
  return { caller, host };
}
