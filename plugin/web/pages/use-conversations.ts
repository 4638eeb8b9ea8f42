/**
 * The signed-in user's conversations, newest first, each titled by its first prompt, optionally only those about
 * one patient: server-side searches of the conversation roots they sent (`_sort=-sent`, `_count`, and
 * `subject` for a patient), a page at a time (`_offset`; one more than a page is asked for, to know whether older
 * ones remain, as Medplum's server does for its `next` link, which not every host gives), then each root's first
 * prompt (`_count=1`). Nothing is fetched in bulk.
 */
import { getReferenceString } from '@medplum/core';
import type { Communication, Patient, Reference } from '@medplum/fhirtypes';
import { useMedplum, useMedplumProfile } from '@medplum/react';
import { useCallback, useEffect, useRef, useState } from 'react';

/** How many conversations a page of the side list shows. */
export const CONVERSATION_PAGE = 20;

export interface ConversationSummary {
  readonly id: string;
  readonly title: string;
  readonly started: string | undefined;
  /** The patient the conversation is about, when it is about one. */
  readonly patient?: Reference<Patient>;
}

export interface ConversationsState {
  readonly conversations: readonly ConversationSummary[] | undefined;
  readonly error: string | undefined;
  /** Whether the server has older conversations than those listed. */
  readonly more: boolean;
  readonly loadingMore: boolean;
  /** Reads the next page of older conversations and adds it to the list. */
  showOlder(): void;
}

interface Listing {
  readonly conversations: readonly ConversationSummary[] | undefined;
  readonly error: string | undefined;
  readonly more: boolean;
  readonly loadingMore: boolean;
}

/** The list; `refresh` changes when it should be read again (after a turn); `patientId` keeps those about that patient. */
export function useConversations(refresh: number, patientId?: string): ConversationsState {
  const medplum = useMedplum();
  const profile = useMedplumProfile();
  const [listing, setListing] = useState<Listing>({ conversations: undefined, error: undefined, more: false, loadingMore: false });
  // Which reading of the list a page belongs to: a page that arrives after the filter changed is dropped.
  const generation = useRef(0);

  const readPage = useCallback(
    async (offset: number): Promise<{ conversations: ConversationSummary[]; more: boolean }> => {
      const found = await medplum.searchResources('Communication', {
        category: 'ai-conversation',
        sender: profile ? getReferenceString(profile) : '',
        ...(patientId ? { subject: `Patient/${patientId}` } : {}),
        _sort: '-sent',
        _count: String(CONVERSATION_PAGE + 1),
        _offset: String(offset),
      }, { cache: 'no-cache' });
      const roots = found.slice(0, CONVERSATION_PAGE);
      const conversations = await Promise.all(roots.map(async (root) => summaryOf(root, await medplum.searchOne('Communication', {
        'part-of': `Communication/${root.id}`,
        category: 'ai-prompt',
        _sort: 'sent',
      }, { cache: 'no-cache' }))));
      return { conversations, more: found.length > CONVERSATION_PAGE };
    },
    [medplum, profile, patientId]
  );

  useEffect(() => {
    if (!profile) {
      return undefined;
    }
    const reading = ++generation.current;
    readPage(0)
      .then((page) => reading === generation.current && setListing({ conversations: page.conversations, error: undefined, more: page.more, loadingMore: false }))
      .catch((error: unknown) => reading === generation.current && setListing({ conversations: [], error: (error as Error).message, more: false, loadingMore: false }));
    return undefined;
  }, [profile, readPage, refresh]);

  const showOlder = useCallback(() => {
    const reading = generation.current;
    const listed = listing.conversations ?? [];
    setListing((current) => ({ ...current, loadingMore: true }));
    readPage(listed.length)
      .then((page) => {
        if (reading === generation.current) {
          // A conversation started meanwhile shifts the pages by one: a conversation already listed is listed once.
          const seen = new Set(listed.map((conversation) => conversation.id));
          setListing({ conversations: [...listed, ...page.conversations.filter((conversation) => !seen.has(conversation.id))], error: undefined, more: page.more, loadingMore: false });
        }
      })
      .catch((error: unknown) => reading === generation.current && setListing((current) => ({ ...current, error: (error as Error).message, loadingMore: false })));
  }, [listing.conversations, readPage]);

  return { ...listing, showOlder };
}

function summaryOf(root: Communication, firstPrompt: Communication | undefined): ConversationSummary {
  const text = firstPrompt?.payload?.find((part) => part.contentString)?.contentString?.trim();
  const patient = root.subject?.reference?.startsWith('Patient/') ? (root.subject as Reference<Patient>) : undefined;
  return { id: root.id as string, title: text ? text.split('\n')[0].slice(0, 80) : 'Untitled conversation', started: root.sent, ...(patient ? { patient } : {}) };
}
