/**
 * A search under an AccessPolicy answers exactly what Medplum would: for generated charts and searches, the page
 * and total the caller's repository returns (the SQLite store deciding the policy's criteria with its index) are
 * those of Medplum's own matcher and policy check (`matchesSearchRequest`, `satisfiedAccessPolicy` from
 * @medplum/core) applied to every stored resource, sorted and paged. The policies are the demo practitioner's
 * (fixtures/demo-project.json: the care-team policy for two patients and her own conversations), a device's, the AI
 * agent's, and one made to reach the rest (a compartment, a `*` rule, criteria of another type, `:not`).
 */
import fc from 'fast-check';
import {
  AccessPolicyInteraction,
  accessPolicySupportsInteraction,
  getSearchParameter,
  getStatus,
  matchesSearchRequest,
  OperationOutcomeError,
  parseSearchRequest,
  satisfiedAccessPolicy,
  type WithId,
} from '@medplum/core';
import type { AccessPolicy, ProjectMembership, Resource } from '@medplum/fhirtypes';
import { AGENT_ACCESS_POLICY } from '../../chat/agent-device.ts';
import { buildDevicePolicy } from '../../devices/device-services.ts';
import { chartRecord, chartSearch, type ReferencePool } from '../../../test/support/chart-arbitraries.ts';
import { buildAccessPolicy } from './auth/access-policy.ts';
import { loadFhirDefinitions } from './fhir-definitions.ts';
import { ProjectRepository } from './project-repository.ts';
import { readProjectFixture, seedProject } from './seed.ts';
import { resolveSortRules, sortResources } from './store/sort.ts';
import { SqliteRepository } from './store/sqlite-repository.ts';

const PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const OTHER_PROJECT = 'another-project';
const DEVICE_ID = 'monitor-1';
const pool: ReferencePool = {
  patients: ['Patient/a1f0c0de-0000-4000-8000-000000000301', 'Patient/a1f0c0de-0000-4000-8000-000000000302', 'Patient/a1f0c0de-0000-4000-8000-000000000303', 'Patient/Other-Patient'],
  practitioner: 'Practitioner/a1f0c0de-0000-4000-8000-000000000201',
  device: `Device/${DEVICE_ID}`,
};

/** Reaches what the fixture's policies do not: a compartment, a `*` rule, criteria of another type, negations. */
const REACHING_POLICY: AccessPolicy = {
  resourceType: 'AccessPolicy',
  resource: [
    { resourceType: 'Observation', compartment: { reference: pool.patients[1] } },
    { resourceType: '*', criteria: 'Observation?status:not=final' },
    { resourceType: 'Communication', criteria: `Communication?sender=${pool.practitioner}&category:not=ai-conversation` },
    { resourceType: 'Condition', criteria: 'Observation?status=final' },
    { resourceType: 'AllergyIntolerance', criteria: 'AllergyIntolerance?patient:missing=false&clinical-status=active' },
  ],
};

let policies: Record<string, AccessPolicy>;

beforeAll(async () => {
  loadFhirDefinitions();
  // The demo practitioner's effective policy, built from the fixture as the host builds it at sign-in.
  const seeded = SqliteRepository.open(':memory:');
  try {
    const project = await seedProject(seeded, await readProjectFixture(), { freshIds: false });
    const membership = await seeded.readResource<ProjectMembership>('ProjectMembership', project.ids['practitioner-membership']);
    const practitioner = await buildAccessPolicy(membership, (reference) => seeded.readReference(reference));
    policies = {
      practitioner,
      'device with a patient': buildDevicePolicy(DEVICE_ID, pool.patients[0].slice('Patient/'.length)),
      'device without a patient': buildDevicePolicy(DEVICE_ID),
      'AI agent': AGENT_ACCESS_POLICY,
      reaching: REACHING_POLICY,
    };
  } finally {
    seeded.close();
  }
});

/** What Medplum's matcher and policy check let the search return of `stored` (in creation order): the page and the total. */
function expected(stored: readonly WithId<Resource>[], query: string, policy: AccessPolicy): { ids: string[]; total: number } | 'forbidden' | 'bad request' {
  const request = parseSearchRequest(query);
  if (!accessPolicySupportsInteraction(policy, AccessPolicyInteraction.SEARCH, request.resourceType)) {
    return 'forbidden';
  }
  if (request.sortRules?.some((rule) => !getSearchParameter(request.resourceType, rule.code))) {
    return 'bad request';
  }
  const matches = stored.filter(
    (resource) => resource.meta?.project === PROJECT && matchesSearchRequest(resource, request) && satisfiedAccessPolicy(resource, AccessPolicyInteraction.SEARCH, policy)
  );
  const rules = resolveSortRules(request.resourceType, request.sortRules);
  // Ties keep the order of creation, newest first when the first rule is descending.
  const sorted = rules.length === 0 ? matches : sortResources(rules[0].descending ? [...matches].reverse() : matches, rules);
  const offset = request.offset ?? 0;
  return { ids: sorted.slice(offset, offset + (request.count ?? 20)).map((resource) => resource.id), total: matches.length };
}

async function actual(repository: ProjectRepository, query: string): Promise<{ ids: string[]; total: number | undefined } | 'forbidden' | 'bad request'> {
  try {
    const bundle = await repository.search(parseSearchRequest(query));
    return { ids: (bundle.entry ?? []).map((entry) => entry.resource?.id as string), total: bundle.total };
  } catch (error) {
    const status = error instanceof OperationOutcomeError ? getStatus(error.outcome) : undefined;
    if (status === 403 || status === 400) {
      return status === 403 ? 'forbidden' : 'bad request';
    }
    throw error;
  }
}

const stored = fc.array(
  fc.record({ record: chartRecord(pool), inOtherProject: fc.nat(9).map((value) => value < 2), deleted: fc.nat(9).map((value) => value === 0) }),
  { minLength: 20, maxLength: 60 }
);

describe('a search under an AccessPolicy answers as Medplum decides', () => {
  test('generated charts and searches, each policy: the same page, in the same order, and the same total', async () => {
    await fc.assert(
      fc.asyncProperty(stored, fc.array(chartSearch(pool), { minLength: 8, maxLength: 20 }), async (records, queries) => {
        const store = SqliteRepository.open(':memory:');
        try {
          const system = new ProjectRepository(store, { projectId: PROJECT, author: { reference: 'Practitioner/writer' } });
          const elsewhere = new ProjectRepository(store, { projectId: OTHER_PROJECT, author: { reference: 'Practitioner/writer' } });
          const live: WithId<Resource>[] = [];
          for (const { record, inOtherProject, deleted } of records) {
            const created = await (inOtherProject ? elsewhere : system).createResource(record);
            if (deleted) {
              await store.deleteResource(created.resourceType, created.id);
            } else {
              live.push(created);
            }
          }
          for (const [name, policy] of Object.entries(policies)) {
            const repository = new ProjectRepository(store, { projectId: PROJECT, author: { reference: pool.practitioner }, accessPolicy: policy });
            for (const query of queries) {
              const want = expected(live, query, policy);
              const got = await actual(repository, query);
              const wantsTotal = query.includes('_total=accurate');
              const comparable = typeof got === 'string' || wantsTotal ? got : { ...got, total: typeof want === 'string' ? undefined : want.total };
              if (JSON.stringify(comparable) !== JSON.stringify(want)) {
                throw new Error(`${name}: ${query}\nexpected ${JSON.stringify(want)}\nreceived ${JSON.stringify(got)}`);
              }
            }
          }
        } finally {
          store.close();
        }
      }),
      { numRuns: 30 }
    );
  }, 240_000);
});
