/**
 * Which patients a stored conversation, or one of its replies, is about. A turn that takes a conversation in (its
 * history) or a reply (a Responses `item_reference`) takes in what was said about those patients, so it is about
 * them too (turn-subject.ts). A conversation's root names its patient when its first turn named one; a conversation
 * started about no patient may have become about one later (a turn that named `patient_id`, or took in a record about
 * a patient): its replies say so, each recorded with its turn's subject.
 */
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { agentAuthored } from './agent-device.ts';
import { findCommunication, type ConversationReader, type ConversationState } from './conversation.ts';
import { CATEGORY } from './fhir-vocabulary.ts';
import { communicationIdOf } from './recorded-messages.ts';

/** Replies with a subject read to find the first genuine one (a user's record among them is passed over). */
const SUBJECT_CANDIDATES = 5;

/**
 * What was read of a conversation before its patients are asked for: step 3's page (conversation.ts), or the reply of
 * the exchange a client that keeps the history repeats.
 */
export interface ConversationRead {
  /** The patients the genuine records read are about (`Patient/<id>`). */
  readonly subjects: ReadonlySet<string>;
  /** True when the conversation's latest reply fhirgate wrote (or the one the request repeats) was among them. */
  readonly latestReplyRead: boolean;
  /** True when every record of the conversation was read. */
  readonly readAll: boolean;
}

/**
 * The patients (`Patient/<id>`) the conversation `root` is about: its root's subject and the subjects of the records
 * read of it. Every turn of a conversation about a patient is about that patient (turn-subject.ts), so its replies
 * name her from the first turn that took her in: a read that holds the latest reply knows the conversation's
 * patients, and the conversation costs no further search. Only a root about no patient whose read held no reply
 * (a page of records a user wrote, or nothing read) costs one search for its earliest reply about a patient. Only
 * fhirgate's records count.
 */
export async function conversationSubjects(reader: ConversationReader, root: WithId<Communication>, read?: ConversationRead): Promise<string[]> {
  const subjects = new Set<string>(read?.subjects ?? []);
  const rootSubject = root.subject?.reference;
  if (rootSubject) {
    subjects.add(rootSubject);
  } else if (!read?.readAll && !read?.latestReplyRead) {
    const earliest = await earliestReplySubject(reader, root.id);
    if (earliest) {
      subjects.add(earliest);
    }
  }
  return [...subjects];
}

/**
 * What the reply of a repeated exchange says of its conversation (a client that keeps the history continues from
 * it, and sends only what came before it): its patient, as the latest reply the request takes in.
 */
export function readOfRepeated(reply: WithId<Communication>): ConversationRead {
  const subject = reply.subject?.reference;
  return { subjects: new Set(subject ? [subject] : []), latestReplyRead: true, readAll: false };
}

/**
 * The patients a stored reply is about: its own subject, and its conversation's (its text was written from that
 * conversation's history). Read with the project's system repository: what the reply is about does not depend on
 * what the caller may read of its conversation.
 */
export async function replySubjects(reader: ConversationReader, reply: WithId<Communication>): Promise<string[]> {
  const subjects = new Set<string>();
  if (reply.subject?.reference) {
    subjects.add(reply.subject.reference);
  }
  const rootId = communicationIdOf(reply.partOf?.[0]?.reference);
  const system = { ...reader, repo: await reader.systemRepo() };
  const root = rootId ? await findCommunication(system.repo, rootId) : undefined;
  if (root) {
    for (const subject of await conversationSubjects(system, root)) {
      subjects.add(subject);
    }
  }
  return [...subjects];
}

/** The subject of the conversation's earliest reply fhirgate wrote about a patient, if any. */
async function earliestReplySubject(reader: ConversationReader, rootId: string): Promise<string | undefined> {
  const candidates = await reader.repo.searchResources<Communication>({
    resourceType: 'Communication',
    filters: [
      { code: 'part-of', operator: 'eq', value: `Communication/${rootId}` },
      { code: 'category', operator: 'eq', value: CATEGORY.response.code },
      { code: 'subject', operator: 'missing', value: 'false' },
    ],
    sortRules: [{ code: 'sent' }],
    count: SUBJECT_CANDIDATES,
  });
  const genuine = await agentAuthored(candidates, reader.agent, reader.systemRepo, reader.authors);
  return candidates.find((candidate) => genuine.has(candidate.id) && candidate.subject?.reference)?.subject?.reference;
}
