/**
 * Asking the caller's repository whether it would allow a write, before making one that another write depends on.
 * Medplum's server `Repository` (5.1 and later) answers with `canPerformInteraction(interaction, resource)`, the
 * check its own writes run; the standalone host's repository answers the same way. The repository is the server's
 * object, so the method is found by shape; a repository without it cannot tell (undefined), and the write itself
 * decides.
 */
import type { FhirRepository } from '@medplum/fhir-router';
import type { Resource } from '@medplum/fhirtypes';

interface AnswersInteractions {
  canPerformInteraction(interaction: 'create', resource: Resource): unknown;
}

/** True or false when the repository can tell whether it would create `resource` in `projectId`; undefined otherwise. */
export function mayCreate(repo: FhirRepository, projectId: string, resource: Resource): boolean | undefined {
  const candidate = repo as Partial<AnswersInteractions>;
  if (typeof candidate.canPerformInteraction !== 'function') {
    return undefined;
  }
  // The server sets meta.project on a write, and checks the policy on the resource as it will be stored.
  return Boolean(candidate.canPerformInteraction('create', { ...resource, meta: { ...resource.meta, project: projectId } }));
}
