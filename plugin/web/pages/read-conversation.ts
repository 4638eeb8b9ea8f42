/**
 * A conversation's thread as fhirgate stores it (docs/api.md, "What is stored"): the prompts and replies that are
 * `partOf` its root Communication, oldest first, side requests (titles, tags) left out; read with the FHIR API as
 * the signed-in user, so what their AccessPolicy hides is not shown; never from MedplumClient's cache, so a thread
 * continued since it was last opened shows its newest turns.
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { ChatMessage } from './use-chat.ts';

/** At most this many records of a thread are read; a longer one shows its newest. */
const THREAD_LIMIT = 200;

export async function readConversation(medplum: MedplumClient, conversationId: string): Promise<ChatMessage[]> {
  const records = await medplum.searchResources('Communication', {
    'part-of': `Communication/${conversationId}`,
    'category:not': 'ai-side-request',
    _sort: '-sent',
    _count: String(THREAD_LIMIT),
  }, { cache: 'no-cache' });
  return [...records].reverse().flatMap((record) => messageOf(record) ?? []);
}

function messageOf(record: Communication): ChatMessage | undefined {
  const codes = record.category?.flatMap((category) => category.coding?.map((coding) => coding.code) ?? []) ?? [];
  const text = (record.payload ?? []).map((part) => part.contentString ?? '').filter(Boolean).join('\n\n');
  if (codes.includes('ai-prompt')) {
    return { role: 'user', text };
  }
  if (codes.includes('ai-response')) {
    return { role: 'assistant', text, stopped: record.status === 'stopped', failed: record.status === 'not-done' };
  }
  return undefined;
}
