/**
 * A conversation's thread as fhirgate stores it (docs/api.md, "What is stored"): the prompts and replies that are
 * `partOf` its root Communication, oldest first, side requests (titles, tags) left out; read with the FHIR API as
 * the signed-in user, so what their AccessPolicy hides is not shown; never from MedplumClient's cache, so a thread
 * continued since it was last opened shows its newest turns. A conversation about a patient names them (`subject`),
 * and each reply the records of the chart it was given (`about`).
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication, Patient, Reference } from '@medplum/fhirtypes';
import { sharedRecordsOf } from './shared-records.ts';
import type { ChatMessage } from './use-chat.ts';

/** At most this many records of a thread are read; a longer one shows its newest. */
const THREAD_LIMIT = 200;

export interface ConversationThread {
  readonly messages: ChatMessage[];
  /** The patient the conversation is about, when it is about one. */
  readonly patient: Reference<Patient> | undefined;
}

export async function readConversation(medplum: MedplumClient, conversationId: string): Promise<ConversationThread> {
  const records = await medplum.searchResources('Communication', {
    'part-of': `Communication/${conversationId}`,
    'category:not': 'ai-side-request',
    _sort: '-sent',
    _count: String(THREAD_LIMIT),
  }, { cache: 'no-cache' });
  // A conversation keeps its patient once a turn is about one: the newest record names it.
  const subject = records.find((record) => record.subject?.reference?.startsWith('Patient/'))?.subject;
  return {
    messages: [...records].reverse().flatMap((record) => messageOf(record) ?? []),
    patient: subject ? { reference: subject.reference } : undefined,
  };
}

/** A reply's message, with the records of the chart it was given; a prompt's; nothing for anything else. */
export function messageOf(record: Communication): ChatMessage | undefined {
  const codes = record.category?.flatMap((category) => category.coding?.map((coding) => coding.code) ?? []) ?? [];
  const text = (record.payload ?? []).map((part) => part.contentString ?? '').filter(Boolean).join('\n\n');
  if (codes.includes('ai-prompt')) {
    return { role: 'user', text };
  }
  if (codes.includes('ai-response')) {
    const shared = sharedRecordsOf(record);
    return { role: 'assistant', text, stopped: record.status === 'stopped', failed: record.status === 'not-done', ...(shared.length ? { shared } : {}) };
  }
  return undefined;
}
