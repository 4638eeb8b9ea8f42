import { jest } from '@jest/globals';
import { OperationOutcomeError, getStatus, parseSearchRequest } from '@medplum/core';
import { MemoryRepository } from '@medplum/fhir-router';
import type { AccessPolicy, Communication, Patient } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from './fhir-definitions.ts';
import { ProjectRepository } from './project-repository.ts';
import { SqliteRepository } from './store/sqlite-repository.ts';

const careTeamPolicy: AccessPolicy = {
  resourceType: 'AccessPolicy',
  resource: [
    { resourceType: 'Patient', criteria: 'Patient?_id=p1', readonly: true, interaction: ['read', 'search'] },
    { resourceType: 'Communication', criteria: 'Communication?subject=Patient/p1', interaction: ['create', 'read', 'search', 'update'] },
  ],
};

function communicationAbout(patientId: string, text = 'hello'): Communication {
  return { resourceType: 'Communication', status: 'completed', subject: { reference: `Patient/${patientId}` }, payload: [{ contentString: text }] };
}

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (error instanceof OperationOutcomeError) {
      return getStatus(error.outcome);
    }
    throw error;
  }
}

describe('ProjectRepository', () => {
  let store: MemoryRepository;
  let system: ProjectRepository;
  let practitioner: ProjectRepository;

  beforeAll(() => loadFhirDefinitions());

  beforeEach(() => {
    store = new MemoryRepository();
    system = new ProjectRepository(store, { projectId: 'project-a', author: { reference: 'Practitioner/admin' } });
    practitioner = new ProjectRepository(store, {
      projectId: 'project-a',
      author: { reference: 'Practitioner/dr' },
      accessPolicy: careTeamPolicy,
    });
  });

  test('sets meta.project, meta.author and compartments itself, whatever the caller sent', async () => {
    const created = await practitioner.createResource<Communication>({
      ...communicationAbout('p1'),
      meta: { project: 'project-b', author: { reference: 'Practitioner/someone-else' } },
    });
    expect(created.meta?.project).toBe('project-a');
    expect(created.meta?.author?.reference).toBe('Practitioner/dr');
    expect(created.meta?.compartment).toEqual([{ reference: 'Project/project-a' }, { reference: 'Patient/p1' }]);
  });

  test('a write the policy denies is 403 and stores nothing', async () => {
    expect(await statusOf(practitioner.createResource(communicationAbout('p2')))).toBe(403);
    expect(await statusOf(practitioner.createResource({ resourceType: 'Observation', status: 'final', code: {} }))).toBe(403);
    const stored = await store.searchResources({ resourceType: 'Communication' });
    expect(stored).toHaveLength(0);
  });

  test('reads of another project or outside the policy are 404', async () => {
    const other = new ProjectRepository(store, { projectId: 'project-b', author: { reference: 'Practitioner/x' } });
    const foreign = await other.createResource(communicationAbout('p1'));
    const hidden = await system.createResource(communicationAbout('p2'));
    const visible = await system.createResource(communicationAbout('p1'));
    expect(await statusOf(practitioner.readResource('Communication', foreign.id))).toBe(404);
    expect(await statusOf(practitioner.readResource('Communication', hidden.id))).toBe(404);
    expect((await practitioner.readResource('Communication', visible.id)).id).toBe(visible.id);
  });

  test('searches return only what the policy allows, paged after filtering', async () => {
    for (let index = 0; index < 5; index++) {
      await system.createResource(communicationAbout('p1', `visible ${index}`));
      await system.createResource(communicationAbout('p2', `hidden ${index}`));
    }
    const firstPage = await practitioner.search<Communication>({ resourceType: 'Communication', count: 3 });
    expect(firstPage.total).toBe(5);
    expect(firstPage.entry).toHaveLength(3);
    const secondPage = await practitioner.search<Communication>({ resourceType: 'Communication', count: 3, offset: 3 });
    expect(secondPage.entry).toHaveLength(2);
    const texts = [...(firstPage.entry ?? []), ...(secondPage.entry ?? [])].map((entry) => entry.resource?.payload?.[0]?.contentString);
    expect(texts.every((text) => text?.startsWith('visible'))).toBe(true);
    expect(await statusOf(practitioner.search({ resourceType: 'Observation' }))).toBe(403);
  });

  test('a narrowed search stops reading candidates once its page is full', async () => {
    for (let index = 0; index < 40; index++) {
      await system.createResource(communicationAbout('p1', `visible ${index}`));
    }
    const storeSearch = jest.spyOn(store, 'search');
    const page = await practitioner.search<Communication>({ resourceType: 'Communication', count: 5 });
    expect(page.entry?.map((entry) => entry.resource?.payload?.[0]?.contentString)).toEqual(['visible 0', 'visible 1', 'visible 2', 'visible 3', 'visible 4']);
    const candidatesAsked = storeSearch.mock.calls.reduce((sum, [request]) => sum + (request.count ?? 0), 0);
    expect(candidatesAsked).toBeLessThan(40);
    // Not every candidate was read, so no total unless one is asked for; asked, it counts them all.
    expect(page.total).toBeUndefined();
    expect((await practitioner.search({ resourceType: 'Communication', count: 5, total: 'accurate' })).total).toBe(40);
  });

  test('a narrowed search reads on past hidden candidates to fill its page', async () => {
    for (let index = 0; index < 12; index++) {
      await system.createResource(communicationAbout('p2', `hidden ${index}`));
    }
    for (let index = 0; index < 4; index++) {
      await system.createResource(communicationAbout('p1', `visible ${index}`));
    }
    const firstPage = await practitioner.search<Communication>({ resourceType: 'Communication', count: 3 });
    expect(firstPage.entry?.map((entry) => entry.resource?.payload?.[0]?.contentString)).toEqual(['visible 0', 'visible 1', 'visible 2']);
    const secondPage = await practitioner.search<Communication>({ resourceType: 'Communication', count: 3, offset: 3 });
    expect(secondPage.entry?.map((entry) => entry.resource?.payload?.[0]?.contentString)).toEqual(['visible 3']);
    expect(secondPage.total).toBe(4);
  });

  test('an update may not move a resource outside the policy', async () => {
    const mine = await practitioner.createResource(communicationAbout('p1'));
    expect(await statusOf(practitioner.updateResource({ ...mine, subject: { reference: 'Patient/p2' } }))).toBe(403);
    expect((await store.readResource<Communication>('Communication', mine.id)).subject?.reference).toBe('Patient/p1');
  });

  test('a system repository is still limited to its project', async () => {
    const other = new ProjectRepository(store, { projectId: 'project-b', author: { reference: 'Practitioner/x' } });
    const foreign = await other.createResource(communicationAbout('p1'));
    expect(await statusOf(system.readResource('Communication', foreign.id))).toBe(404);
    expect(await statusOf(system.deleteResource('Communication', foreign.id))).toBe(404);
    expect(await system.searchResources({ resourceType: 'Communication' })).toHaveLength(0);
  });

  test('a search page holds at most 1,000 resources, and 20 unless asked, as on Medplum', async () => {
    for (let created = 0; created < 1005; created += 201) {
      await Promise.all(Array.from({ length: 201 }, () => system.createResource(communicationAbout('p1'))));
    }
    for (const repository of [system, practitioner]) {
      expect((await repository.searchResources({ resourceType: 'Communication', count: 100_000 })).length).toBe(1000);
      expect((await repository.searchResources({ resourceType: 'Communication', count: 1001 })).length).toBe(1000);
      expect((await repository.searchResources({ resourceType: 'Communication', count: 999 })).length).toBe(999);
      expect((await repository.searchResources({ resourceType: 'Communication' })).length).toBe(20);
    }
    const counted = await practitioner.search({ resourceType: 'Communication', count: 100_000, total: 'accurate' });
    expect(counted.entry).toHaveLength(1000);
    expect(counted.total).toBe(1005);
  });

  test('on a store that narrows by the policy, the matches are kept and included resources the policy hides dropped', async () => {
    const sqlite = SqliteRepository.open(':memory:');
    try {
      const admin = new ProjectRepository(sqlite, { projectId: 'project-a', author: { reference: 'Practitioner/admin' } });
      const visible = await admin.createResource<Patient>({ resourceType: 'Patient' });
      const hidden = await admin.createResource<Patient>({ resourceType: 'Patient' });
      const shared = await admin.createResource<Communication>({
        ...communicationAbout(visible.id),
        recipient: [{ reference: `Patient/${visible.id}` }, { reference: `Patient/${hidden.id}` }],
      });
      await admin.createResource(communicationAbout(hidden.id, 'about the other patient'));
      const careTeam = new ProjectRepository(sqlite, {
        projectId: 'project-a',
        author: { reference: 'Practitioner/dr' },
        accessPolicy: {
          resourceType: 'AccessPolicy',
          resource: [
            { resourceType: 'Patient', criteria: `Patient?_id=${visible.id}` },
            { resourceType: 'Communication', criteria: `Communication?subject=Patient/${visible.id}` },
          ],
        },
      });
      const bundle = await careTeam.search(parseSearchRequest('Communication?_include=Communication:recipient'));
      const entries = bundle.entry?.map((entry) => `${entry.search?.mode} ${entry.resource?.resourceType}/${entry.resource?.id}`);
      expect(entries?.sort()).toEqual([`include Patient/${visible.id}`, `match Communication/${shared.id}`]);
    } finally {
      sqlite.close();
    }
  });
});
