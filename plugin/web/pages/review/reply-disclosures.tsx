/**
 * Under a reply about a patient: the records its model was given (the reply's `about`, as references: the reviewer
 * reads no chart) and the AuditEvents that recorded the disclosure (who asked, when, what was sent).
 */
import { Code, List, Stack, Text } from '@mantine/core';
import { formatDateTime } from '@medplum/core';
import type { AuditEvent } from '@medplum/fhirtypes';
import type { JSX } from 'react';
import { RequestorName } from './requestor-name.tsx';

export function ReplyDisclosures(props: { readonly shared: readonly string[]; readonly events: readonly AuditEvent[] }): JSX.Element {
  return (
    <Stack gap={4} mt="xs" aria-label="Disclosure">
      <Text size="sm" fw={500}>
        Records shared with the model ({props.shared.length})
      </Text>
      <List size="sm">
        {props.shared.map((reference) => (
          <List.Item key={reference}>
            <Code>{reference}</Code>
          </List.Item>
        ))}
      </List>
      {props.events.length === 0 ? (
        <Text size="sm">No disclosure record you may read.</Text>
      ) : (
        props.events.map((event) => (
          <Text size="sm" key={event.id}>
            Recorded {formatDateTime(event.recorded)}, asked by <RequestorName event={event} />: {event.outcomeDesc}
          </Text>
        ))
      )}
    </Stack>
  );
}
