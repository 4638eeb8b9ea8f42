import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication, Reference } from '@medplum/fhirtypes';
import { agentAuthored, KnownAuthors } from './agent-device.ts';

const AGENT = { reference: 'Device/agent' };

/** A record as a server shows it to a chat client: its version, not its author. */
function shown(id: string, versionId: string): WithId<Communication> {
  return { resourceType: 'Communication', id, status: 'completed', meta: { versionId } };
}

/** The system repository: every version's author, and how many references were read. */
function systemRepoWith(authors: Record<string, { versionId: string; author: Reference }>): { repo: () => Promise<FhirRepository>; reads: () => number } {
  let reads = 0;
  const repo = {
    readReferences: async (references: readonly Reference[]) => {
      reads += references.length;
      return references.map((reference) => {
        const id = reference.reference?.split('/')[1] ?? '';
        const known = authors[id];
        return known ? { resourceType: 'Communication', id, status: 'completed', meta: { versionId: known.versionId, author: known.author } } : new Error('not found');
      });
    },
  } as unknown as FhirRepository;
  return { repo: async () => repo, reads: () => reads };
}

describe('agentAuthored with the authors already known', () => {
  test("a version's author is read once: asked again, the answer comes from what is known; a new version is read again", async () => {
    const system = systemRepoWith({ r1: { versionId: 'v1', author: AGENT }, r2: { versionId: 'v1', author: { reference: 'Practitioner/p' } } });
    const authors = new KnownAuthors();
    expect(await agentAuthored([shown('r1', 'v1'), shown('r2', 'v1')], AGENT, system.repo, authors)).toEqual(new Set(['r1']));
    expect(system.reads()).toBe(2);
    expect(await agentAuthored([shown('r1', 'v1'), shown('r2', 'v1')], AGENT, system.repo, authors)).toEqual(new Set(['r1']));
    expect(system.reads()).toBe(2);

    // Someone edited r1: its new version is not the agent's, whatever the old one's author was.
    const edited = systemRepoWith({ r1: { versionId: 'v2', author: { reference: 'Practitioner/p' } } });
    expect(await agentAuthored([shown('r1', 'v2')], AGENT, edited.repo, authors)).toEqual(new Set());
    expect(edited.reads()).toBe(1);
  });

  test('versions this process wrote as the agent are known without a read', async () => {
    const system = systemRepoWith({});
    const authors = new KnownAuthors();
    authors.remember('Communication/r1', 'v1', AGENT.reference);
    expect(await agentAuthored([shown('r1', 'v1')], AGENT, system.repo, authors)).toEqual(new Set(['r1']));
    expect(system.reads()).toBe(0);
  });
});
