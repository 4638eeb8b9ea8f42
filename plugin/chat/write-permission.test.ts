import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication, Resource } from '@medplum/fhirtypes';
import { mayCreate } from './write-permission.ts';

const PROMPT: Communication = { resourceType: 'Communication', status: 'completed', meta: { tag: [{ code: 'prompt' }] } };

/** A repository that answers `canPerformInteraction` with `answer`, and keeps what it was asked. */
function repoAnswering(answer: unknown): { repo: FhirRepository; asked: { interaction: string; resource: Resource }[] } {
  const asked: { interaction: string; resource: Resource }[] = [];
  const repo = {
    canPerformInteraction: (interaction: string, resource: Resource) => {
      asked.push({ interaction, resource });
      return answer;
    },
  } as unknown as FhirRepository;
  return { repo, asked };
}

describe('mayCreate: asking the repository before a write another write depends on', () => {
  test("the repository's answer, as a boolean: allowed, refused", () => {
    expect(mayCreate(repoAnswering(true).repo, 'project-1', PROMPT)).toBe(true);
    expect(mayCreate(repoAnswering(false).repo, 'project-1', PROMPT)).toBe(false);
    // Medplum's server answers with the policy entry that allows it, or undefined.
    expect(mayCreate(repoAnswering({ resourceType: 'Communication' }).repo, 'project-1', PROMPT)).toBe(true);
    expect(mayCreate(repoAnswering(undefined).repo, 'project-1', PROMPT)).toBe(false);
  });

  test("the policy is checked on the resource as it will be stored: a create, in the caller's project, the rest of meta kept", () => {
    const { repo, asked } = repoAnswering(true);
    mayCreate(repo, 'project-1', PROMPT);
    expect(asked).toEqual([{ interaction: 'create', resource: { ...PROMPT, meta: { tag: [{ code: 'prompt' }], project: 'project-1' } } }]);
    // The caller's resource is not changed.
    expect(PROMPT.meta).toEqual({ tag: [{ code: 'prompt' }] });
  });

  test('a resource without meta is asked about with meta.project alone', () => {
    const { repo, asked } = repoAnswering(true);
    mayCreate(repo, 'project-2', { resourceType: 'Communication', status: 'completed' });
    expect(asked[0]?.resource).toEqual({ resourceType: 'Communication', status: 'completed', meta: { project: 'project-2' } });
  });

  test('a repository that cannot tell (no canPerformInteraction, or not a function): undefined, the write decides', () => {
    expect(mayCreate({} as FhirRepository, 'project-1', PROMPT)).toBeUndefined();
    expect(mayCreate({ canPerformInteraction: true } as unknown as FhirRepository, 'project-1', PROMPT)).toBeUndefined();
  });
});
