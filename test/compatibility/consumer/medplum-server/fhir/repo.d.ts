// Medplum 5.1's packages/server/src/fhir/repo.ts, as far as the mount uses it.
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AccessPolicy, ClientApplication, Project, Reference } from '@medplum/fhirtypes';

export interface RepositoryContext {
  shardId?: string;
  author: Reference;
  onBehalfOf?: Reference;
  client?: Reference<ClientApplication>;
  remoteAddress?: string;
  projects?: WithId<Project>[];
  currentProject?: WithId<Project>;
  accessPolicy?: AccessPolicy;
  superAdmin?: boolean;
  projectAdmin?: boolean;
  strictMode?: boolean;
  checkReferencesOnWrite?: boolean;
  validateTerminology?: boolean;
  extendedMode?: boolean;
  skipBackgroundJobs?: boolean;
}

export declare const Repository: new (context: RepositoryContext) => FhirRepository;

export declare function getProjectSystemRepo(projectId: string | Reference<Project> | WithId<Project>): Promise<FhirRepository>;
