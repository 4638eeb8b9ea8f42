import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AccessPolicy, Communication, Device, Reference } from '@medplum/fhirtypes';
import { AGENT_ACCESS_POLICY, AgentDevices, agentAuthored, KnownAuthors, type AgentRepositories } from './agent-device.ts';
import { AGENT_DEVICE_IDENTIFIER, CATEGORY } from './fhir-vocabulary.ts';

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

/** A project's store of Devices as the system repository sees it: a conditional create finds the device its search names. */
function deviceStore(): { repositories: AgentRepositories; devices: Device[]; lookups: () => number; failNext: () => void; deviceRepos: { accessPolicy: AccessPolicy; device: Reference<Device> }[] } {
  const devices: Device[] = [];
  const deviceRepos: { accessPolicy: AccessPolicy; device: Reference<Device> }[] = [];
  let lookups = 0;
  let failing = false;
  const systemRepo = {
    conditionalCreate: async (resource: Device, search: { resourceType: string; filters: { code: string; operator: string; value: string }[] }) => {
      lookups += 1;
      if (failing) {
        failing = false;
        throw new Error('store unavailable');
      }
      const wanted = search.filters.find((filter) => filter.code === 'identifier' && filter.operator === 'eq')?.value;
      const found = devices.find((device) => device.identifier?.some((identifier) => `${identifier.system}|${identifier.value}` === wanted));
      if (search.resourceType === 'Device' && found) {
        return { resource: found };
      }
      const created = { ...resource, id: `device-${devices.length + 1}` };
      devices.push(created);
      return { resource: created };
    },
  } as unknown as FhirRepository;
  const repositories: AgentRepositories = {
    systemRepo: async () => systemRepo,
    deviceRepo: async (_projectId, accessPolicy, device) => {
      deviceRepos.push({ accessPolicy, device });
      return {} as FhirRepository;
    },
  };
  return { repositories, devices, lookups: () => lookups, failNext: () => (failing = true), deviceRepos };
}

describe("the AI agent's Device", () => {
  test('is created once, named and marked as the agent, and found again by another process rather than created twice', async () => {
    const store = deviceStore();
    const agent = await new AgentDevices(store.repositories, 'Ward assistant').referenceFor('p1');
    expect(store.devices).toHaveLength(1);
    expect(store.devices[0]).toMatchObject({ resourceType: 'Device', status: 'active', identifier: [AGENT_DEVICE_IDENTIFIER], deviceName: [{ name: 'Ward assistant', type: 'user-friendly-name' }] });
    expect(store.devices[0].type?.text).toContain('AI agent');
    expect(agent).toEqual({ reference: `Device/${store.devices[0].id}`, display: 'Ward assistant' });
    expect(await new AgentDevices(store.repositories, 'Ward assistant').referenceFor('p1')).toEqual(agent);
    expect(store.devices).toHaveLength(1);
  });

  test('is looked up once per project and process; a failed lookup is tried again on the next request', async () => {
    const store = deviceStore();
    const agents = new AgentDevices(store.repositories, 'AI');
    store.failNext();
    await expect(agents.referenceFor('p1')).rejects.toThrow('store unavailable');
    const first = await agents.referenceFor('p1');
    expect(await agents.referenceFor('p1')).toBe(first);
    expect(store.lookups()).toBe(2);
  });

  test("writes as the agent under the agent's policy, which grants Communications of its categories and never an update or delete", async () => {
    const store = deviceStore();
    const agents = new AgentDevices(store.repositories, 'AI');
    await agents.repoFor('p1');
    await agents.repoFor('p1');
    expect(store.deviceRepos).toHaveLength(2);
    expect(store.deviceRepos[0]).toEqual({ accessPolicy: AGENT_ACCESS_POLICY, device: await agents.referenceFor('p1') });
    const grants = AGENT_ACCESS_POLICY.resource ?? [];
    expect(grants.map((grant) => grant.criteria)).toEqual([`Communication?category=${CATEGORY.response.code}`, `Communication?category=${CATEGORY.conversation.code}`]);
    for (const grant of grants) {
      expect(grant.resourceType).toBe('Communication');
      expect([...(grant.interaction ?? [])].sort()).toEqual(['create', 'read', 'search', 'vread']);
    }
  });

  test('a version it wrote is remembered as the agent\'s, by type, id and version', async () => {
    const store = deviceStore();
    const agents = new AgentDevices(store.repositories, 'AI');
    await agents.rememberWritten('p1', { ...shown('r1', 'v1') });
    const agent = (await agents.referenceFor('p1')).reference;
    expect(agents.authors.authorOf('Communication/r1', 'v1')).toBe(agent);
    expect(agents.authors.authorOf('Communication/r1', 'v2')).toBeUndefined();
    expect(agents.authors.authorOf('Communication/r1', undefined)).toBeUndefined();
  });
});

describe('KnownAuthors', () => {
  test('remembers nothing without a version or an author', () => {
    const authors = new KnownAuthors();
    authors.remember('Communication/r1', undefined, AGENT.reference);
    authors.remember('Communication/r2', 'v1', undefined);
    expect([authors.authorOf('Communication/r1', undefined), authors.authorOf('Communication/r2', 'v1')]).toEqual([undefined, undefined]);
  });
});

describe("agentAuthored: the agent's words, and nobody else's", () => {
  test('an author the server shows (extended mode) is taken as it is, without a read', async () => {
    const system = systemRepoWith({});
    const records = [
      { ...shown('r1', 'v1'), meta: { versionId: 'v1', author: AGENT } },
      { ...shown('r2', 'v1'), meta: { versionId: 'v1', author: { reference: 'Practitioner/p' } } },
    ];
    expect(await agentAuthored(records, AGENT, system.repo)).toEqual(new Set(['r1']));
    expect(system.reads()).toBe(0);
  });

  test("a record gone, or edited since the caller read it, is not the agent's; one read without a version is", async () => {
    const system = systemRepoWith({ r1: { versionId: 'v2', author: AGENT }, r3: { versionId: 'v1', author: AGENT } });
    const records = [shown('r1', 'v1'), shown('r2', 'v1'), { resourceType: 'Communication' as const, id: 'r3', status: 'completed' as const }];
    expect(await agentAuthored(records, AGENT, system.repo)).toEqual(new Set(['r3']));
    expect(system.reads()).toBe(3);
  });

  test('records whose authors are all known are decided without the system repository', async () => {
    const authors = new KnownAuthors();
    authors.remember('Communication/r1', 'v1', AGENT.reference);
    const noSystemRights = (): Promise<FhirRepository> => Promise.reject(new Error('system rights not needed'));
    expect(await agentAuthored([shown('r1', 'v1'), { ...shown('r2', 'v1'), meta: { versionId: 'v1', author: AGENT } }], AGENT, noSystemRights, authors)).toEqual(new Set(['r1', 'r2']));
    expect(await agentAuthored([], AGENT, noSystemRights)).toEqual(new Set());
  });

  test('without known authors, every record without a shown author is read', async () => {
    const system = systemRepoWith({ r1: { versionId: 'v1', author: AGENT } });
    expect(await agentAuthored([shown('r1', 'v1')], AGENT, system.repo)).toEqual(new Set(['r1']));
    expect(await agentAuthored([], AGENT, system.repo)).toEqual(new Set());
    expect(system.reads()).toBe(1);
  });
});
