/**
 * Disclosures of patient records (AuditEvents) to the chat's AI models and to MCP clients, for one patient or one
 * user over a period, listed by a `SearchControl`, each row saying who asked and where the records went (the model
 * and its conversation, or the MCP client and the tool it called). The reviewer reads no chart, so a patient is chosen
 * by its id (typed, or from a conversation's thread). A chat's disclosure opens the thread of the reply it was sent
 * for; an MCP client's has no reply to open. The disclosures the filters select export as a FHIR Bundle, with the
 * replies they were sent for.
 */
import { Button, Group, Select, Text, TextInput } from '@mantine/core';
import type { SearchRequest } from '@medplum/core';
import type { AuditEvent, Communication, Resource } from '@medplum/fhirtypes';
import { SearchControl, useMedplum } from '@medplum/react';
import { useState, type JSX } from 'react';
import { useNavigate } from 'react-router';
import { ExportButton } from './export-button.tsx';
import { buildExportBundle, collectDisclosures, repliesOf } from './export-bundle.ts';
import { FilterForm } from './filter-form.tsx';
import { PeriodInputs } from './period-inputs.tsx';
import { RequestorName } from './requestor-name.tsx';
import { disclosureSearch, type DisclosureFilters, type DisclosureRecipientKind } from './review-searches.ts';
import { SentTo } from './sent-to.tsx';
import { UserSelect } from './user-select.tsx';

const RECIPIENT_CHOICES: { value: DisclosureRecipientKind; label: string }[] = [
  { value: 'model', label: "The chat's AI models" },
  { value: 'mcp', label: 'MCP clients' },
];

/** The columns computed from each event, after the time and the description. */
const COLUMNS = [
  {
    name: 'Asked by',
    renderCell: (resource: Resource) => (
      <Text size="sm">
        <RequestorName event={resource as AuditEvent} />
      </Text>
    ),
  },
  { name: 'Sent to', renderCell: (resource: Resource) => <SentTo event={resource as AuditEvent} /> },
];

export function DisclosuresPanel(props: { readonly initial?: DisclosureFilters }): JSX.Element {
  const medplum = useMedplum();
  const navigate = useNavigate();
  const [draft, setDraft] = useState<DisclosureFilters>(props.initial ?? {});
  const [search, setSearch] = useState<SearchRequest>(() => disclosureSearch(props.initial));
  const [applied, setApplied] = useState<DisclosureFilters>(props.initial ?? {});
  const apply = (filters: DisclosureFilters): void => {
    setApplied(filters);
    setSearch(disclosureSearch(filters));
  };
  const openReply = async (event: AuditEvent): Promise<void> => {
    const [reply] = repliesOf([event]);
    const conversation = reply ? (await medplum.readReference<Communication>({ reference: reply })).partOf?.[0]?.reference?.split('/')[1] : undefined;
    if (conversation) {
      navigate(`/review/conversations/${conversation}`);
    }
  };
  const exportName = `disclosures-${applied.patient?.replace('Patient/', '') || 'all'}${applied.recipient ? `-${applied.recipient}` : ''}-${applied.from ?? 'start'}-${applied.to ?? 'now'}.json`;
  return (
    <>
      <FilterForm label="Filter the disclosures" onSearch={() => apply(draft)} onClear={() => { setDraft({}); apply({}); }}>
        <TextInput label="Patient id" placeholder="Any patient" value={draft.patient ?? ''} onChange={(event) => setDraft({ ...draft, patient: event.currentTarget.value })} />
        <UserSelect label="User" value={draft.user ?? ''} onChange={(user) => setDraft({ ...draft, user })} />
        <Select
          label="Sent to"
          placeholder="Models and MCP clients"
          data={RECIPIENT_CHOICES}
          value={draft.recipient ?? null}
          onChange={(recipient) => setDraft({ ...draft, recipient: (recipient ?? undefined) as DisclosureRecipientKind | undefined })}
          clearable
          comboboxProps={{ withinPortal: false }}
        />
        <PeriodInputs value={draft} onChange={(period) => setDraft({ ...draft, ...period })} />
      </FilterForm>
      <Group mb="sm">
        <ExportButton
          label="Export these disclosures"
          fileName={exportName}
          build={async () => buildExportBundle(medplum.getBaseUrl(), await collectDisclosures(medplum, disclosureSearch(applied)))}
        />
      </Group>
      <SearchControl
        search={search}
        additionalColumns={COLUMNS}
        onChange={(event) => setSearch(event.definition)}
        onClick={(event) => void openReply(event.resource as AuditEvent)}
        hideFilters
      />
    </>
  );
}

/** A link-like button to a patient's disclosures, for a thread about that patient. */
export function PatientDisclosuresLink(props: { readonly patient: string }): JSX.Element {
  const navigate = useNavigate();
  const id = props.patient.replace('Patient/', '');
  return (
    <Button variant="subtle" size="compact-sm" onClick={() => navigate(`/review?tab=disclosures&patient=${encodeURIComponent(id)}`)}>
      Every disclosure of this patient
    </Button>
  );
}
