/**
 * One conversation's whole thread for a reviewer: the conversation (who, about whom, when), then each prompt and
 * reply in order; for a reply its model, tokens and status, and for each turn exactly what the model was sent.
 * Read with the reviewer's token: a record their AccessPolicy hides is not shown.
 */
import { Alert, Anchor, Badge, Code, Group, Loader, Paper, Stack, Text, Title } from '@mantine/core';
import { formatDateTime } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { Document, ResourceName, useResource, useSearchResources } from '@medplum/react';
import type { JSX } from 'react';
import { Link, useParams } from 'react-router';
import { threadEntries, type ThreadEntry } from './thread-records.ts';
import './review-contrast.css';

export function ThreadPage(): JSX.Element {
  const { id = '' } = useParams();
  const conversation = useResource<Communication>({ reference: `Communication/${id}` });
  const [records, loading, outcome] = useSearchResources('Communication', { 'part-of': `Communication/${id}`, _sort: 'sent', _count: '200' });
  const entries = threadEntries(records ?? []);
  return (
    <Document className="fhirgate-review">
      <Anchor component={Link} to="/review">
        Back to the review
      </Anchor>
      <Title order={1} my="md">
        Conversation
      </Title>
      {conversation && (
        <Group gap="xs" mb="md">
          <Text>Started {conversation.sent ? formatDateTime(conversation.sent) : ''} by</Text>
          {conversation.sender && <ResourceName value={conversation.sender} />}
          {conversation.subject && (
            <>
              <Text>about</Text>
              <Text fw={500}>{conversation.subject.display ?? conversation.subject.reference}</Text>
            </>
          )}
        </Group>
      )}
      {loading && <Loader aria-label="Loading the thread" />}
      {outcome && !records?.length && <Alert color="red" title="The thread could not be read">{outcome.issue?.[0]?.details?.text ?? 'You may not read this conversation.'}</Alert>}
      <Stack aria-label="Thread">
        {entries.map((entry) => (
          <ThreadRecord key={entry.id} entry={entry} />
        ))}
      </Stack>
    </Document>
  );
}

function ThreadRecord({ entry }: { readonly entry: ThreadEntry }): JSX.Element {
  const label = entry.kind === 'prompt' ? 'Prompt' : 'Reply';
  return (
    <Paper withBorder p="md" aria-label={label} component="article">
      <Group justify="space-between" mb="xs">
        <Text fw={700}>{label}</Text>
        <Group gap="xs">
          {entry.model && <Badge variant="light">{entry.model}</Badge>}
          <Badge color={entry.status === 'completed' ? 'green' : 'orange'} variant="light">
            {entry.status}
          </Badge>
          {entry.sent && <Text size="sm">{formatDateTime(entry.sent)}</Text>}
        </Group>
      </Group>
      <Text style={{ whiteSpace: 'pre-wrap' }}>{entry.text || '(no text)'}</Text>
      {entry.tokens && (
        <Text size="sm" mt="xs">
          Tokens: {entry.tokens.prompt ?? '?'} in, {entry.tokens.completion ?? '?'} out, {entry.tokens.total ?? '?'} in all
          {entry.tokens.estimated ? ' (estimated)' : ''}
        </Text>
      )}
      {entry.patientContext && <SentText title="Patient summary sent to the model" text={entry.patientContext} />}
      {entry.request && <SentText title="Request sent by the client" text={entry.request} />}
    </Paper>
  );
}

function SentText({ title, text }: { readonly title: string; readonly text: string }): JSX.Element {
  return (
    <details>
      <summary>{title}</summary>
      <Code block tabIndex={0} aria-label={title} style={{ whiteSpace: 'pre-wrap' }}>
        {text}
      </Code>
    </details>
  );
}
