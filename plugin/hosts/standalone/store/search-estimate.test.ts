/**
 * `_total=estimate` (what `@medplum/react`'s lists can ask instead of an exact count): answered from the index
 * without reading the matches, counting only the caller's project, and exactly under an AccessPolicy that narrows
 * the search, so an estimate never counts what the caller may not see. The conversations of a project, newest
 * first, are one range of the index however many there are.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jest } from '@jest/globals';
import { parseSearchRequest } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { loadFhirDefinitions } from '../fhir-definitions.ts';
import { ResourceStore } from './resource-store.ts';
import { rowsRead } from '../../../../test/support/store-rows-read.ts';
import { openStoreDatabase } from './schema.ts';
import { estimateMatches } from './search-estimate.ts';
import { SqliteRepository } from './sqlite-repository.ts';

const CATEGORY = { coding: [{ system: 'urn:fhirgate:communication-category', code: 'ai-conversation' }] };

function conversation(project: string, sender: string, minute: number): Communication {
  return {
    resourceType: 'Communication',
    status: 'in-progress',
    category: [CATEGORY],
    sender: { reference: sender },
    sent: new Date(Date.UTC(2026, 0, 1) + minute * 60_000).toISOString(),
    meta: { project },
  };
}

let repository: SqliteRepository;

beforeAll(() => loadFhirDefinitions());

beforeEach(async () => {
  repository = SqliteRepository.open(':memory:');
  const resources = [
    ...Array.from({ length: 300 }, (_, minute) => conversation('project-a', minute % 3 === 0 ? 'Practitioner/carter' : 'Practitioner/lee', minute)),
    ...Array.from({ length: 200 }, (_, minute) => conversation('project-b', 'Practitioner/other', minute)),
  ];
  await Promise.all(resources.map((resource) => repository.createResource(resource)));
});

afterEach(() => {
  jest.restoreAllMocks();
  repository.close();
});

function search(query: string, total: 'estimate' | 'accurate'): ReturnType<typeof parseSearchRequest<Communication>> {
  const request = parseSearchRequest<Communication>(`Communication?${query}`);
  return { ...request, total };
}

test("an estimate counts the project's matches from the index, never another project's", async () => {
  const bundle = await repository.search(search('category=ai-conversation&_project=project-a&_sort=-sent&_count=20', 'estimate'));
  expect(bundle.total).toBe(300);
  expect(bundle.entry).toHaveLength(20);
  expect(bundle.entry?.[0].resource?.sent).toBe(new Date(Date.UTC(2026, 0, 1) + 299 * 60_000).toISOString());
  const accurate = await repository.search(search('category=ai-conversation&_project=project-a&_sort=-sent&_count=20', 'accurate'));
  expect(accurate.total).toBe(300);
  expect(accurate.entry?.map((entry) => entry.resource?.id)).toEqual(bundle.entry?.map((entry) => entry.resource?.id));
});

test('under an AccessPolicy that narrows the search, the estimate is the exact count of what the caller may read', async () => {
  const alternatives = [{ filters: parseSearchRequest('Communication?sender=Practitioner/carter').filters ?? [] }];
  const bundle = await repository.searchWithinPolicy(search('category=ai-conversation&_project=project-a&_count=5', 'estimate'), alternatives);
  expect(bundle.total).toBe(100);
});

test("a project's newest conversations are read as one range of the index, not by reading every conversation", async () => {
  const rows = await rowsRead(async () => {
    const bundle = await repository.search(search('category=ai-conversation&_project=project-a&_sort=-sent&_count=20', 'estimate'));
    expect(bundle.entry).toHaveLength(20);
  });
  expect(rows).toBeLessThan(120);
});

test("past the exact count, the estimate extrapolates from the project's own rows, within a tenth of the truth", async () => {
  const directory = mkdtempSync(join(tmpdir(), 'fhirgate-estimate-'));
  const path = join(directory, 'store.sqlite');
  const file = SqliteRepository.open(path);
  // Project A: one conversation in four of its Communications; project B: conversations only, interleaved.
  const resources: Communication[] = [];
  for (let index = 0; index < 1200; index++) {
    resources.push(index % 4 === 0 ? conversation('project-a', 'Practitioner/carter', index) : { ...conversation('project-a', 'Practitioner/carter', index), category: [] });
    resources.push(conversation('project-b', 'Practitioner/other', index));
  }
  for (const resource of resources) {
    await file.createResource(resource);
  }
  file.close();
  const database = openStoreDatabase(path);
  try {
    const store = { rows: new ResourceStore(database), read: async <R>(work: () => R): Promise<R> => work() };
    const lookup = { kind: 'index' as const, param: 'category', values: ['ai-conversation'], rank: 1, reference: false };
    const estimate = await estimateMatches(store, 'Communication', lookup, 'project-a', 100);
    expect(Math.abs(estimate - 300)).toBeLessThanOrEqual(30);
    expect(await estimateMatches(store, 'Communication', lookup, 'project-a', 1000)).toBe(300);
  } finally {
    database.close();
    rmSync(directory, { recursive: true, force: true });
  }
});

test("a search's order is read from the sorted lookup of any of its equally selective filters, whichever comes first", async () => {
  // `status` (no sorted lookup) before `category` (sorted by sent): the page is still one range of the index.
  const query = search('status=in-progress&category=ai-conversation&_project=project-a&_sort=-sent&_count=20', 'accurate');
  const rows = await rowsRead(async () => {
    const bundle = await repository.search<Communication>({ ...query, total: undefined });
    expect(bundle.entry).toHaveLength(20);
    expect(bundle.entry?.[0].resource?.sent).toBe(new Date(Date.UTC(2026, 0, 1) + 299 * 60_000).toISOString());
  });
  expect(rows).toBeLessThan(120);
});
