/** The first and last day of a period (UTC days, both included), as two date fields. */
import { TextInput } from '@mantine/core';
import type { JSX } from 'react';
import type { Period } from './review-searches.ts';

export function PeriodInputs(props: { readonly value: Period; readonly onChange: (value: Period) => void }): JSX.Element {
  return (
    <>
      <TextInput type="date" label="From" value={props.value.from ?? ''} onChange={(event) => props.onChange({ ...props.value, from: event.currentTarget.value || undefined })} />
      <TextInput type="date" label="To" value={props.value.to ?? ''} onChange={(event) => props.onChange({ ...props.value, to: event.currentTarget.value || undefined })} />
    </>
  );
}
