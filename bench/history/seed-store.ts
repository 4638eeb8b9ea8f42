/**
 * Builds the store file of the history benchmark: the demo project (through the host's own seed), the AI agent
 * Device (through the plugin's own lookup), then every Communication bulk-inserted straight into the SQLite schema
 * (bench/lib/bulk-store.ts), each with the `search_index` rows of the store's own SearchIndexSpec.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Communication } from '@medplum/fhirtypes';
import { AgentDevices } from '../../plugin/chat/agent-device.ts';
import { STORE_FILE_NAME } from '../../plugin/hosts/standalone/open-store.ts';
import { ProjectRepository } from '../../plugin/hosts/standalone/project-repository.ts';
import { readProjectFixture, seedProject } from '../../plugin/hosts/standalone/seed.ts';
import { SearchIndexSpec } from '../../plugin/hosts/standalone/store/search-index.ts';
import { SqliteRepository } from '../../plugin/hosts/standalone/store/sqlite-repository.ts';
import { BulkStore } from '../lib/bulk-store.ts';
import { buildSeededConversation, type ConversationOwner } from './bulk-communications.ts';
import { IndexRowChecker, communicationIndexRows } from './communication-index-rows.ts';

/** The demo project's ids, as `fixtures/demo-project.json` has them. */
export const DEMO = {
  projectId: 'a1f0c0de-0000-4000-8000-000000000001',
  practitioner: 'Practitioner/a1f0c0de-0000-4000-8000-000000000201',
  patients: ['Patient/a1f0c0de-0000-4000-8000-000000000301', 'Patient/a1f0c0de-0000-4000-8000-000000000302'],
} as const;

/** What to put in the store. */
export interface SeedPlan {
  /** Earlier turns of the measured long conversation. */
  readonly longConversationTurns: number;
  /** Empty conversations (root only), one per "fresh" request. */
  readonly freshConversations: number;
  /** Other Communications, spread over many conversations in several projects (the demo project included). */
  readonly otherCommunications: number;
}

/** What the seeded store holds, for the load. */
export interface SeededStore {
  readonly longConversationId: string;
  readonly freshConversationIds: readonly string[];
  readonly communications: number;
  readonly seedSeconds: number;
  /** Resources whose bulk index rows were compared with the store's own `rowsFor`. */
  readonly indexRowsChecked: number;
}

const OTHER_PROJECTS = 3;
/** Conversations of 1 to 20 turns (about 10.5 on average, 22 Communications with the root). */
const MAX_TURNS = 20;
/** Every earlier message is older than the measured requests: the seeded history starts a year back. */
const YEAR_MILLIS = 365 * 24 * 3600 * 1000;

/** Writes a new store file into `dataDir` (replacing one there) as `plan` says. */
export async function seedStore(dataDir: string, plan: SeedPlan): Promise<SeededStore> {
  const started = performance.now();
  const path = join(dataDir, STORE_FILE_NAME);
  for (const suffix of ['', '-wal', '-shm']) {
    rmSync(path + suffix, { force: true });
  }
  const agent = await seedProjectAndAgent(path);
  const rows = new BulkRows(path);
  try {
    const demoOwner = (subject: string | undefined): ConversationOwner => ({
      projectId: DEMO.projectId,
      caller: DEMO.practitioner,
      agent,
      subject,
    });
    const startMillis = Date.now() - YEAR_MILLIS;
    const long = buildSeededConversation(demoOwner(DEMO.patients[0]), plan.longConversationTurns, startMillis);
    const freshConversationIds: string[] = [];
    for (let index = 0; index < plan.freshConversations; index++) {
      const fresh = buildSeededConversation(demoOwner(DEMO.patients[0]), 0, startMillis + index);
      rows.insert(fresh.resources);
      freshConversationIds.push(fresh.rootId);
    }
    // The long conversation's turns are interleaved with the others, as turns arrive over time in a real store.
    const slices = 100;
    const perSlice = Math.ceil(long.resources.length / slices);
    const othersPerSlice = Math.ceil(plan.otherCommunications / slices);
    const others = otherConversations(agent, plan.otherCommunications, startMillis);
    for (let slice = 0; slice < slices; slice++) {
      rows.insert(long.resources.slice(slice * perSlice, (slice + 1) * perSlice));
      rows.insertFrom(others, othersPerSlice);
    }
    rows.finish();
    return {
      longConversationId: long.rootId,
      freshConversationIds,
      communications: rows.count,
      indexRowsChecked: rows.checker.checked,
      seedSeconds: (performance.now() - started) / 1000,
    };
  } finally {
    rows.close();
  }
}

/** The demo project and its AI agent, through the host's and plugin's own code, into the store file at `path`; returns `Device/<id>`. */
export async function seedProjectAndAgent(path: string): Promise<string> {
  const store = SqliteRepository.open(path, { synchronous: 'NORMAL' });
  try {
    await seedProject(store, await readProjectFixture(), { freshIds: false });
    const agents = new AgentDevices(
      {
        systemRepo: async (projectId) => new ProjectRepository(store, { projectId, author: { reference: 'system' } }),
        deviceRepo: async (projectId, accessPolicy, device) => new ProjectRepository(store, { projectId, author: device, accessPolicy }),
      },
      'fhirgate AI agent'
    );
    const reference = await agents.referenceFor(DEMO.projectId);
    return reference.reference as string;
  } finally {
    store.close();
  }
}

/** Conversations of other callers: the demo practitioner's other patients and chats, and three other projects. */
function* otherConversations(demoAgent: string, total: number, startMillis: number): Generator<Communication> {
  const projects = Array.from({ length: OTHER_PROJECTS }, () => ({
    projectId: randomUUID(),
    caller: `Practitioner/${randomUUID()}`,
    agent: `Device/${randomUUID()}`,
  }));
  let written = 0;
  for (let index = 0; written < total; index++) {
    const turns = 1 + ((index * 7919) % MAX_TURNS);
    const project = index % (OTHER_PROJECTS + 1);
    const owner: ConversationOwner =
      project === 0
        ? { projectId: DEMO.projectId, caller: DEMO.practitioner, agent: demoAgent, subject: [...DEMO.patients, undefined][index % 3] }
        : { ...projects[project - 1], subject: `Patient/synthetic-${project}-${index % 500}` };
    const conversation = buildSeededConversation(owner, turns, startMillis + index * 60_000);
    for (const resource of conversation.resources.slice(0, total - written)) {
      yield resource;
    }
    written += conversation.resources.length;
  }
}

/** The bulk load (bench/lib/bulk-store.ts), each Communication's index rows built from its fields and checked on samples. */
class BulkRows {
  readonly #store: BulkStore;
  readonly checker = new IndexRowChecker(new SearchIndexSpec(), 997);

  constructor(path: string) {
    this.#store = new BulkStore(path);
  }

  get count(): number {
    return this.#store.count;
  }

  insert(resources: Iterable<Communication>): void {
    for (const resource of resources) {
      this.#insertOne(resource);
    }
  }

  /** Inserts up to `limit` Communications from `source`. */
  insertFrom(source: Iterator<Communication>, limit: number): void {
    for (let inserted = 0; inserted < limit; inserted++) {
      const next = source.next();
      if (next.done) {
        return;
      }
      this.#insertOne(next.value);
    }
  }

  finish(): void {
    this.#store.finish();
  }

  close(): void {
    this.#store.close();
  }

  #insertOne(resource: Communication): void {
    this.#store.insert(resource as Communication & { id: string }, resource.sent as string, (stored, content) => {
      const indexRows = communicationIndexRows(stored);
      this.checker.check(content, indexRows);
      return indexRows;
    });
  }
}
