/**
 * Loads a project fixture (a Bundle whose entries name each other by `urn:uuid:<name>` full URLs) into the
 * store. The demo project keeps the ids written in the fixture, so the docs can name them; tests load the same
 * fixture with fresh ids, so each test has a project of its own.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Bundle, ClientApplication, Resource } from '@medplum/fhirtypes';

/** The fixture of the demo project. */
export const DEMO_PROJECT_FIXTURE = new URL('../../../fixtures/demo-project.json', import.meta.url);

const GENERATED_SECRET = '%generated-secret';

/** A loaded project: the id of each fixture entry by its name, and the client's credentials. */
export interface SeededProject {
  readonly projectId: string;
  /** Fixture entry name (the part after `urn:uuid:`) → id in the store. */
  readonly ids: Readonly<Record<string, string>>;
  readonly created: boolean;
  /** The first ClientApplication of the fixture, with its secret. */
  readonly client?: { readonly id: string; readonly secret: string };
}

/** Reads a fixture file. */
export async function readProjectFixture(url: URL = DEMO_PROJECT_FIXTURE): Promise<Bundle> {
  return JSON.parse(await readFile(url, 'utf8')) as Bundle;
}

/**
 * Loads a fixture into the store. With `freshIds` every resource gets a new id; without, the fixture's ids are
 * kept and a project that already exists is left as it is (so the demo seed runs at every start).
 */
export async function seedProject(store: FhirRepository, fixture: Bundle, options: { freshIds: boolean }): Promise<SeededProject> {
  const entries = (fixture.entry ?? []).map((entry) => ({ name: nameOf(entry.fullUrl), resource: entry.resource as Resource }));
  const ids: Record<string, string> = {};
  const types: Record<string, string> = {};
  for (const { name, resource } of entries) {
    ids[name] = options.freshIds || !resource.id ? randomUUID() : resource.id;
    types[name] = resource.resourceType;
  }
  const projectEntry = entries.find((entry) => entry.resource.resourceType === 'Project');
  if (!projectEntry) {
    throw new Error('A project fixture needs a Project entry');
  }
  const projectId = ids[projectEntry.name];
  const existing = await store.readResource('Project', projectId).catch(() => undefined);
  if (existing) {
    return { projectId, ids, created: false, client: await findClient(store, entries, ids) };
  }
  for (const { name, resource } of entries) {
    const resolved = resolveReferences(resource, ids, types) as Resource;
    await store.createResource(
      { ...resolved, id: ids[name], meta: { ...resolved.meta, project: projectId } },
      { assignedId: true }
    );
  }
  return { projectId, ids, created: true, client: await findClient(store, entries, ids) };
}

function nameOf(fullUrl: string | undefined): string {
  if (!fullUrl?.startsWith('urn:uuid:')) {
    throw new Error(`Fixture entries need a urn:uuid: fullUrl, got ${fullUrl ?? 'none'}`);
  }
  return fullUrl.slice('urn:uuid:'.length);
}

/** Replaces `urn:uuid:<name>` references with `Type/id` and fills generated secrets. */
function resolveReferences(value: unknown, ids: Record<string, string>, types: Record<string, string>): unknown {
  if (Array.isArray(value)) {
    return value.map((item) => resolveReferences(item, ids, types));
  }
  if (typeof value === 'string') {
    if (value === GENERATED_SECRET) {
      return randomBytes(32).toString('hex');
    }
    if (value.startsWith('urn:uuid:')) {
      const name = value.slice('urn:uuid:'.length);
      if (!ids[name]) {
        throw new Error(`Fixture reference to unknown entry ${value}`);
      }
      return `${types[name]}/${ids[name]}`;
    }
    return value;
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolveReferences(item, ids, types)]));
  }
  return value;
}

async function findClient(
  store: FhirRepository,
  entries: readonly { name: string; resource: Resource }[],
  ids: Record<string, string>
): Promise<SeededProject['client']> {
  const entry = entries.find((candidate) => candidate.resource.resourceType === 'ClientApplication');
  if (!entry) {
    return undefined;
  }
  const client: WithId<ClientApplication> = await store.readResource('ClientApplication', ids[entry.name]);
  return client.secret ? { id: client.id, secret: client.secret } : undefined;
}
