/**
 * The project's conversations, filtered by user, patient, date, outcome and model, listed by a `SearchControl` (the
 * server pages, sorts and filters). The outcome and the model are a reply's, so with either the list shows the
 * replies that match, each opening its conversation's thread.
 */
import { Select, Text, TextInput } from '@mantine/core';
import type { SearchRequest } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { SearchControl } from '@medplum/react';
import { useState, type JSX } from 'react';
import { useNavigate } from 'react-router';
import { FilterForm } from './filter-form.tsx';
import { PeriodInputs } from './period-inputs.tsx';
import { conversationSearch, listsReplies, OUTCOMES, type ConversationFilters, type Outcome } from './review-searches.ts';
import { UserSelect } from './user-select.tsx';

const OUTCOME_CHOICES = Object.keys(OUTCOMES).map((outcome) => ({ value: outcome, label: outcome }));

export function ConversationsPanel(): JSX.Element {
  const navigate = useNavigate();
  const [draft, setDraft] = useState<ConversationFilters>({});
  const [applied, setApplied] = useState<ConversationFilters>({});
  const [search, setSearch] = useState<SearchRequest>(() => conversationSearch());
  const apply = (filters: ConversationFilters): void => {
    setApplied(filters);
    setSearch(conversationSearch(filters));
  };
  const open = (record: Communication): void => {
    // A reply opens the conversation it is part of; a conversation root opens itself.
    const conversation = listsReplies(applied) ? record.partOf?.[0]?.reference?.split('/')[1] : record.id;
    if (conversation) {
      navigate(`/review/conversations/${conversation}`);
    }
  };
  return (
    <>
      <FilterForm label="Filter the conversations" onSearch={() => apply(draft)} onClear={() => { setDraft({}); apply({}); }}>
        <UserSelect label="User" value={draft.user ?? ''} onChange={(user) => setDraft({ ...draft, user })} />
        <TextInput label="Patient id" placeholder="Any patient" value={draft.patient ?? ''} onChange={(event) => setDraft({ ...draft, patient: event.currentTarget.value })} />
        <PeriodInputs value={draft} onChange={(period) => setDraft({ ...draft, ...period })} />
        <Select
          label="Outcome"
          placeholder="Any"
          data={OUTCOME_CHOICES}
          value={draft.outcome ?? null}
          onChange={(outcome) => setDraft({ ...draft, outcome: (outcome ?? undefined) as Outcome | undefined })}
          clearable
          comboboxProps={{ withinPortal: false }}
        />
        <TextInput label="Model" placeholder="provider/model" value={draft.model ?? ''} onChange={(event) => setDraft({ ...draft, model: event.currentTarget.value })} />
      </FilterForm>
      {listsReplies(applied) && (
        <Text size="sm" mb="xs">
          The outcome and the model are recorded on each reply: these are the replies that match. Open one to read its conversation.
        </Text>
      )}
      <SearchControl search={search} onChange={(event) => setSearch(event.definition)} onClick={(event) => open(event.resource as Communication)} hideFilters />
    </>
  );
}
