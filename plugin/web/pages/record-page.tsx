/**
 * One record of a chart (`/records/:resourceType/:id`), as Medplum's resource table shows it, read as the signed-in
 * user: a record their AccessPolicy hides, or that does not exist, reads the same "not available", so nothing of it
 * leaks. Reached from the records shared with the model under a reply.
 */
import { Alert, Anchor, Container, Loader, Stack, Title } from '@mantine/core';
import { getDisplayString } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { Document, ResourceTable, useMedplum } from '@medplum/react';
import { useEffect, useState, type JSX } from 'react';
import { Link, useLocation, useParams } from 'react-router';
import { isRecordAddress, recordKind } from './shared-records.ts';

type RecordState = { readonly status: 'loading' } | { readonly status: 'read'; readonly record: Resource } | { readonly status: 'not-available' };

export function RecordPage(): JSX.Element {
  const medplum = useMedplum();
  const { resourceType, id } = useParams();
  // Back to the conversation the record was opened from, when it was.
  const from = (useLocation().state as { from?: unknown } | null)?.from;
  const [state, setState] = useState<RecordState>({ status: 'loading' });
  useEffect(() => {
    if (!resourceType || !id || !isRecordAddress(resourceType, id)) {
      setState({ status: 'not-available' });
      return undefined;
    }
    let current = true;
    setState({ status: 'loading' });
    medplum
      .readReference({ reference: `${resourceType}/${id}` })
      .then((record) => current && setState({ status: 'read', record }))
      .catch(() => current && setState({ status: 'not-available' }));
    return () => {
      current = false;
    };
  }, [medplum, resourceType, id]);

  const kind = recordKind(resourceType ?? 'Record');
  return (
    <Container size="md" py="md">
      <Stack>
        <Anchor component={Link} to={typeof from === 'string' && from.startsWith('/chat') ? from : '/chat'} size="sm">
          Back to the chat
        </Anchor>
        <Title order={1}>{state.status === 'read' ? `${kind}: ${getDisplayString(state.record)}` : kind}</Title>
        {state.status === 'loading' && <Loader size="sm" aria-label="Reading the record" />}
        {state.status === 'not-available' && (
          <Alert color="gray" title="Not available">
            This record is not available to you: your access does not include it, or it no longer exists.
          </Alert>
        )}
        {state.status === 'read' && (
          <Document>
            {/* Without its id row: the table's copy button there has no accessible name (the id is in the address). */}
            <ResourceTable value={{ ...state.record, id: undefined }} forceUseInput ignoreMissingValues />
          </Document>
        )}
      </Stack>
    </Container>
  );
}
