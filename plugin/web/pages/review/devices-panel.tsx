/**
 * Device sign-ins: the AuditEvents of the device token exchange (docs/devices.md): tokens issued, refusals (a wrong
 * key, an unknown device, a device locked out after too many failed attempts) and the summaries of refusals counted
 * rather than recorded one by one, newest first, listed by a `SearchControl`.
 */
import { Select } from '@mantine/core';
import type { SearchRequest } from '@medplum/core';
import { SearchControl } from '@medplum/react';
import { useState, type JSX } from 'react';
import { FilterForm } from './filter-form.tsx';
import { PeriodInputs } from './period-inputs.tsx';
import { deviceSearch, type DeviceFilters } from './review-searches.ts';

const OUTCOME_CHOICES = [
  { value: 'issued', label: 'Token issued' },
  { value: 'refused', label: 'Refused (failed attempts, lockouts)' },
];

export function DevicesPanel(): JSX.Element {
  const [draft, setDraft] = useState<DeviceFilters>({});
  const [search, setSearch] = useState<SearchRequest>(() => deviceSearch());
  return (
    <>
      <FilterForm label="Filter the device sign-ins" onSearch={() => setSearch(deviceSearch(draft))} onClear={() => { setDraft({}); setSearch(deviceSearch()); }}>
        <Select
          label="Outcome"
          placeholder="Any"
          data={OUTCOME_CHOICES}
          value={draft.outcome ?? null}
          onChange={(outcome) => setDraft({ ...draft, outcome: (outcome ?? undefined) as DeviceFilters['outcome'] })}
          clearable
          comboboxProps={{ withinPortal: false }}
        />
        <PeriodInputs value={draft} onChange={(period) => setDraft({ ...draft, ...period })} />
      </FilterForm>
      <SearchControl search={search} onChange={(event) => setSearch(event.definition)} onClick={() => undefined} hideFilters />
    </>
  );
}
