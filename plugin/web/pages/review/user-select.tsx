/**
 * A picker of the project's users, by name: the Practitioners the signed-in reviewer may read (one search, the first
 * 200 by name). Its value is the user's reference, `Practitioner/<id>`.
 */
import { Select } from '@mantine/core';
import { getDisplayString } from '@medplum/core';
import { useSearchResources } from '@medplum/react';
import type { JSX } from 'react';

export function UserSelect(props: { readonly label: string; readonly value: string; readonly onChange: (value: string) => void }): JSX.Element {
  const [practitioners] = useSearchResources('Practitioner', { _count: '200', _sort: 'name' });
  const data = (practitioners ?? []).map((practitioner) => ({ value: `Practitioner/${practitioner.id}`, label: getDisplayString(practitioner) }));
  return (
    <Select
      label={props.label}
      placeholder="Anyone"
      data={data}
      value={props.value || null}
      onChange={(value) => props.onChange(value ?? '')}
      searchable
      clearable
      comboboxProps={{ withinPortal: false }}
    />
  );
}
