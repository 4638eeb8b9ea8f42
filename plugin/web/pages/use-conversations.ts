/**
 * The signed-in user's conversations, newest first, each titled by its first prompt: one server-side search of the
 * conversation roots they sent (`_sort=-_lastUpdated`, `_count`), then each root's first prompt (`_count=1`).
 */
import { getReferenceString } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { useMedplum, useMedplumProfile } from '@medplum/react';
import { useEffect, useState } from 'react';

/** How many conversations the side list shows. */
export const CONVERSATION_PAGE = 20;

export interface ConversationSummary {
  readonly id: string;
  readonly title: string;
  readonly started: string | undefined;
}

export interface ConversationsState {
  readonly conversations: readonly ConversationSummary[] | undefined;
  readonly error: string | undefined;
}

/** The list; `refresh` changes when it should be read again (after a turn). */
export function useConversations(refresh: number): ConversationsState {
  const medplum = useMedplum();
  const profile = useMedplumProfile();
  const [state, setState] = useState<ConversationsState>({ conversations: undefined, error: undefined });
  useEffect(() => {
    if (!profile) {
      return undefined;
    }
    let current = true;
    const read = async (): Promise<ConversationSummary[]> => {
      const roots = await medplum.searchResources('Communication', {
        category: 'ai-conversation',
        sender: getReferenceString(profile),
        _sort: '-_lastUpdated',
        _count: String(CONVERSATION_PAGE),
      }, { cache: 'no-cache' });
      return Promise.all(roots.map(async (root) => summaryOf(root, await medplum.searchOne('Communication', {
        'part-of': `Communication/${root.id}`,
        category: 'ai-prompt',
        _sort: 'sent',
      }, { cache: 'no-cache' }))));
    };
    read()
      .then((conversations) => current && setState({ conversations, error: undefined }))
      .catch((error: unknown) => current && setState({ conversations: [], error: (error as Error).message }));
    return () => {
      current = false;
    };
  }, [medplum, profile, refresh]);
  return state;
}

function summaryOf(root: Communication, firstPrompt: Communication | undefined): ConversationSummary {
  const text = firstPrompt?.payload?.find((part) => part.contentString)?.contentString?.trim();
  return { id: root.id as string, title: text ? text.split('\n')[0].slice(0, 80) : 'Untitled conversation', started: root.sent };
}
