import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AccessPolicy, Communication, Device, Reference } from '@medplum/fhirtypes';
import { LRUCache } from 'lru-cache';
import { AGENT_DEVICE_IDENTIFIER, CATEGORY } from './fhir-vocabulary.ts';

/**
 * What the AI agent may do: write (and read back) replies and conversation roots, nothing else, never update or
 * delete. Its writes carry the agent's Device as `meta.author`, which the server sets and no caller can: the mark
 * of a record fhirgate wrote (see isAgentAuthored).
 */
export const AGENT_ACCESS_POLICY: AccessPolicy = {
  resourceType: 'AccessPolicy',
  name: 'fhirgate AI agent',
  resource: [CATEGORY.response, CATEGORY.conversation].map((category) => ({
    resourceType: 'Communication',
    criteria: `Communication?category=${category.code}`,
    interaction: ['create', 'read', 'vread', 'search'],
  })),
};

/** How the agent's repository is made: the host port's device repository, and its system repository. */
export interface AgentRepositories {
  readonly systemRepo: (projectId: string) => Promise<FhirRepository>;
  readonly deviceRepo: (projectId: string, accessPolicy: AccessPolicy, device: Reference<Device>) => Promise<FhirRepository>;
}

/**
 * The AI agent's `Device` of each project (the `sender` and `meta.author` of every reply), found by its identifier
 * or created on first use with system rights. Looked up once per project and process.
 */
export class AgentDevices {
  /** Authors of the versions this process wrote as the agent, or read back (see agentAuthored). */
  readonly authors = new KnownAuthors();
  readonly #known = new Map<string, Promise<Reference<Device>>>();
  readonly #repositories: AgentRepositories;
  readonly #deviceName: string;

  constructor(repositories: AgentRepositories, deviceName: string) {
    this.#repositories = repositories;
    this.#deviceName = deviceName;
  }

  /** The agent's Device reference in a project. */
  referenceFor(projectId: string): Promise<Reference<Device>> {
    let known = this.#known.get(projectId);
    if (!known) {
      known = this.#findOrCreate(projectId);
      // A failed lookup is retried on the next request rather than remembered.
      known.catch(() => this.#known.delete(projectId));
      this.#known.set(projectId, known);
    }
    return known;
  }

  /**
   * A repository that writes as the project's AI agent, under AGENT_ACCESS_POLICY. A new one each time: a
   * server's repository carries the state of one request (its transaction), so it is never shared between turns.
   */
  async repoFor(projectId: string): Promise<FhirRepository> {
    return this.#repositories.deviceRepo(projectId, AGENT_ACCESS_POLICY, await this.referenceFor(projectId));
  }

  /** Notes that `stored` (as a write through `repoFor(projectId)` returned it) is the agent's version. */
  async rememberWritten(projectId: string, stored: WithId<Communication>): Promise<void> {
    this.authors.remember(`Communication/${stored.id}`, stored.meta?.versionId, (await this.referenceFor(projectId)).reference);
  }

  async #findOrCreate(projectId: string): Promise<Reference<Device>> {
    const repo = await this.#repositories.systemRepo(projectId);
    const identifier = `${AGENT_DEVICE_IDENTIFIER.system}|${AGENT_DEVICE_IDENTIFIER.value}`;
    const { resource } = await repo.conditionalCreate<Device>(
      {
        resourceType: 'Device',
        status: 'active',
        identifier: [{ ...AGENT_DEVICE_IDENTIFIER }],
        deviceName: [{ name: this.#deviceName, type: 'user-friendly-name' }],
        type: { text: 'AI agent (fhirgate chat gateway)' },
      },
      { resourceType: 'Device', filters: [{ code: 'identifier', operator: 'eq', value: identifier }] }
    );
    return { reference: `Device/${resource.id}`, display: this.#deviceName };
  }
}

/** Most authors {@link KnownAuthors} keeps; the least recently used go first. */
const KNOWN_AUTHORS_LIMIT = 20_000;

/**
 * Who wrote stored versions, as far as this process knows: the records the AI agent wrote through it, and the
 * authors read back with the system repository. A version's author never changes (an update makes a new version,
 * with a new `versionId`, authored by whoever made it), so an answer known once holds for good and a continued
 * conversation need not read its earlier replies' authors again. Keyed by type, id and `versionId`. Kept in
 * lru-cache: a Map used as the queue left a hole at every refresh that each lookup and eviction walked past.
 */
export class KnownAuthors {
  readonly #authors = new LRUCache<string, string>({ max: KNOWN_AUTHORS_LIMIT });

  /** Records that `author` wrote version `versionId` of `reference` (e.g. `Communication/<id>`). */
  remember(reference: string, versionId: string | undefined, author: string | undefined): void {
    if (versionId === undefined || author === undefined) {
      return;
    }
    this.#authors.set(`${reference}/${versionId}`, author);
  }

  /** The author of that version, when known. */
  authorOf(reference: string, versionId: string | undefined): string | undefined {
    return versionId === undefined ? undefined : this.#authors.get(`${reference}/${versionId}`);
  }
}

/**
 * The ids of those `records` whose current version the AI agent wrote: fhirgate wrote them, and nobody changed them
 * since (an update makes the updater the author). The server records the author in `meta.author`, which no writer
 * can set. A Medplum server shows it to a caller only in extended mode (`X-Medplum: extended`), which chat clients
 * do not ask for: records read without it are looked up in `authors` (versions this process wrote or read before),
 * and the rest read again with the project's system rights, for their author only, and count only if that is still
 * the version the caller read. Replies and roots that fail this are not the AI's words, whatever their category,
 * sender or text say.
 */
export async function agentAuthored(
  records: readonly WithId<Communication>[],
  agent: Reference<Device>,
  systemRepo: () => Promise<FhirRepository>,
  authors?: KnownAuthors
): Promise<Set<string>> {
  const authored = new Set<string>();
  const unknown = new Map<string, string | undefined>();
  for (const record of records) {
    const versionId = record.meta?.versionId;
    const author = record.meta?.author?.reference ?? authors?.authorOf(`Communication/${record.id}`, versionId);
    if (author === undefined) {
      unknown.set(record.id, versionId);
    } else if (author === agent.reference) {
      authored.add(record.id);
    }
  }
  if (unknown.size > 0) {
    const repo = await systemRepo();
    const read = await repo.readReferences<Communication>([...unknown.keys()].map((id) => ({ reference: `Communication/${id}` })));
    for (const item of read) {
      if (item instanceof Error || !item.id) {
        continue;
      }
      authors?.remember(`Communication/${item.id}`, item.meta?.versionId, item.meta?.author?.reference);
      if (item.meta?.author?.reference !== agent.reference) {
        continue;
      }
      const versionRead = unknown.get(item.id);
      if (versionRead === undefined || versionRead === item.meta?.versionId) {
        authored.add(item.id);
      }
    }
  }
  return authored;
}
