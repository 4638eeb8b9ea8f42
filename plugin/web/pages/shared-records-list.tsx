/**
 * Under a reply about a patient: the records of the chart the model was given for it (the reply's `about`), each
 * a link to the record's page. Each is read as the signed-in user; one they cannot read says so and names nothing.
 */
import { Anchor, List, Stack, Text } from '@mantine/core';
import { getDisplayString, isOk } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { useResource } from '@medplum/react';
import { useMemo, useState, type JSX } from 'react';
import { Link, useLocation } from 'react-router';
import { recordKind, recordPath, type SharedRecord } from './shared-records.ts';

export function SharedRecordsList({ records }: { readonly records: readonly SharedRecord[] }): JSX.Element {
  const heading = `Shared with the model: ${records.length} ${records.length === 1 ? 'record' : 'records'} of the chart`;
  return (
    <Stack gap={4} mt="xs" component="section" aria-label="Records shared with the model">
      <Text size="xs" fw={600} c="gray.7">
        {heading}
      </Text>
      <List size="sm" spacing={2}>
        {records.map((record) => (
          <List.Item key={record.reference}>
            <SharedRecordLink record={record} />
          </List.Item>
        ))}
      </List>
    </Stack>
  );
}

function SharedRecordLink({ record }: { readonly record: SharedRecord }): JSX.Element {
  const [outcome, setOutcome] = useState<OperationOutcome>();
  // One reference object per record: useResource reads again whenever its value changes identity.
  const reference = useMemo(() => ({ reference: record.reference }), [record.reference]);
  const resource = useResource(reference, setOutcome);
  const kind = recordKind(record.resourceType);
  const here = useLocation();
  if (outcome && !isOk(outcome)) {
    return (
      <Text size="sm" c="gray.7">
        {kind}: not available to you
      </Text>
    );
  }
  return (
    <Anchor component={Link} to={recordPath(record)} state={{ from: `${here.pathname}${here.search}` }} size="sm">
      {resource ? `${kind}: ${getDisplayString(resource)}` : kind}
    </Anchor>
  );
}
