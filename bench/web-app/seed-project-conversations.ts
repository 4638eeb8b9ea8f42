/**
 * The store of scenario 11 (the web app at scale): one project holding `conversations` conversations of its
 * practitioners, `communications` Communications in all, and the disclosure AuditEvents of every reply about a
 * patient, bulk-loaded with the store's own index rows as a chat request would have written them.
 *
 * A tenth of the conversations are Dr. Carter's (the demo clinician), about Maria Lopez, James Chen or no patient;
 * the rest belong to `practitioners` colleagues of the project (Practitioner resources of their own), about patients
 * of the project. Conversations have 1 to 8 turns (4.5 on average, so 10 Communications a conversation), one a
 * minute over the last two years, the newest last.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { AuditEvent, Communication, Practitioner, Resource } from '@medplum/fhirtypes';
import { buildDisclosureEvent } from '../../plugin/chat/disclosure-audit.ts';
import { STORE_FILE_NAME } from '../../plugin/hosts/standalone/open-store.ts';
import { SearchIndexSpec } from '../../plugin/hosts/standalone/store/search-index.ts';
import { buildSeededConversation, type ConversationOwner } from '../history/bulk-communications.ts';
import { IndexRowChecker, communicationIndexRows } from '../history/communication-index-rows.ts';
import { DEMO, seedProjectAndAgent } from '../history/seed-store.ts';
import { BulkStore } from '../lib/bulk-store.ts';

/** What to put in the store. */
export interface ProjectConversationsPlan {
  readonly conversations: number;
  /** Colleagues of Dr. Carter in the project, each with conversations of their own. */
  readonly practitioners: number;
}

/** What the seeded store holds. */
export interface ProjectConversationsSeeded {
  readonly resources: Readonly<Record<string, number>>;
  /** Dr. Carter's conversations. */
  readonly clinicianConversations: number;
  readonly seedSeconds: number;
}

const MAX_TURNS = 8;
const CLINICIAN_SHARE = 10;
const OTHER_PATIENTS = 1000;
const TWO_YEARS_MILLIS = 2 * 365 * 24 * 3600 * 1000;

/** Writes a new store file into `dataDir` as `plan` says. */
export async function seedProjectConversations(dataDir: string, plan: ProjectConversationsPlan): Promise<ProjectConversationsSeeded> {
  const started = performance.now();
  const path = join(dataDir, STORE_FILE_NAME);
  for (const suffix of ['', '-wal', '-shm']) {
    rmSync(path + suffix, { force: true });
  }
  const agent = await seedProjectAndAgent(path);
  const store = new BulkStore(path);
  const spec = new SearchIndexSpec();
  // The fast Communication rows are compared with the store's own on samples: a change to either fails the seed.
  const checker = new IndexRowChecker(spec, 997);
  const counts: Record<string, number> = {};
  const insert = (resource: Resource & { id: string }, lastUpdated: string): void => {
    store.insert(resource, lastUpdated, (stored, content) => {
      if (stored.resourceType !== 'Communication') {
        return spec.rowsFor(stored);
      }
      const rows = communicationIndexRows(stored as Communication);
      checker.check(content, rows);
      return rows;
    });
    counts[resource.resourceType] = (counts[resource.resourceType] ?? 0) + 1;
  };
  try {
    const projectMeta = { project: DEMO.projectId, compartment: [{ reference: `Project/${DEMO.projectId}` }] };
    const colleagues = Array.from({ length: plan.practitioners }, (_, index): Practitioner & { id: string } => ({
      resourceType: 'Practitioner',
      id: randomUUID(),
      name: [{ given: [`Colleague ${index + 1}`], family: 'Bench', prefix: ['Dr.'] }],
      meta: { ...projectMeta, author: { reference: 'system' } },
    }));
    const start = Date.now() - TWO_YEARS_MILLIS;
    for (const colleague of colleagues) {
      insert(colleague, new Date(start).toISOString());
    }
    let clinicianConversations = 0;
    for (let index = 0; index < plan.conversations; index++) {
      const clinician = index % CLINICIAN_SHARE === 0;
      clinicianConversations += clinician ? 1 : 0;
      const owner: ConversationOwner = {
        projectId: DEMO.projectId,
        caller: clinician || colleagues.length === 0 ? DEMO.practitioner : `Practitioner/${colleagues[index % colleagues.length].id}`,
        agent,
        subject: clinician ? [...DEMO.patients, undefined][index % 3] : index % 3 === 0 ? undefined : `Patient/${otherPatientId(index % OTHER_PATIENTS)}`,
      };
      const turns = 1 + ((index * 7919) % MAX_TURNS);
      const startedAt = start + Math.floor((index * TWO_YEARS_MILLIS) / Math.max(plan.conversations, 1));
      const conversation = buildSeededConversation(owner, turns, startedAt);
      for (const resource of conversation.resources) {
        insert(resource as Communication & { id: string }, resource.sent as string);
        if (owner.subject && isReply(resource)) {
          const event = disclosureOf(owner, resource);
          insert(event, event.recorded);
        }
      }
    }
    store.finish();
    return { resources: counts, clinicianConversations, seedSeconds: (performance.now() - started) / 1000 };
  } finally {
    store.close();
  }
}

function isReply(resource: Communication): boolean {
  return resource.category?.some((category) => category.coding?.some((coding) => coding.code === 'ai-response')) ?? false;
}

/** The AuditEvent the reply's patient summary would have written, at the reply's time, with the project's meta. */
function disclosureOf(owner: ConversationOwner, reply: Communication): AuditEvent & { id: string } {
  const subject = owner.subject as string;
  const event = buildDisclosureEvent({
    caller: { reference: owner.caller },
    agent: { reference: owner.agent },
    patient: { reference: subject },
    shared: [{ reference: subject }, { reference: `Condition/${otherPatientId(1)}` }],
    replyId: reply.id as string,
    access: { kind: 'summary' },
  });
  const compartment = [{ reference: `Project/${owner.projectId}` }, { reference: subject }];
  return { ...event, id: randomUUID(), recorded: reply.sent as string, meta: { project: owner.projectId, author: { reference: owner.agent }, compartment } };
}

/** The id of one of the project's other patients (referenced, not stored: the reviewer reads no chart). */
function otherPatientId(index: number): string {
  return `bench-patient-${index}`;
}
