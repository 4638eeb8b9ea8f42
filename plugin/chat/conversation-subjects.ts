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
 * The patients (`Patient/<id>`) the conversation `root` is about: its root's subject, the subjects of the records
 * step 3 read of it (`state`), and, for a root about no patient whose records were not all read, the subject of its
 * earliest reply about one (one search). Only fhirgate's records count.
 */
export async function conversationSubjects(reader: ConversationReader, root: WithId<Communication>, state?: ConversationState): Promise<string[]> {
  const subjects = new Set<string>(state?.subjects ?? []);
  const rootSubject = root.subject?.reference;
  if (rootSubject) {
    subjects.add(rootSubject);
  } else if (!state?.readAll) {
    const earliest = await earliestReplySubject(reader, root.id);
    if (earliest) {
      subjects.add(earliest);
    }
  }
  return [...subjects];
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
