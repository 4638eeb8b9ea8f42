/**
 * One conversation's whole thread for a reviewer: the conversation (who, about whom, when), then each prompt and
 * reply in order; for a reply its model, tokens, cost, latency and outcome, exactly what the model was sent (the
 * de-identified form where it was de-identified), and the records it disclosed with their AuditEvents. The
 * conversation exports as a FHIR Bundle. Read with the reviewer's token: a record their AccessPolicy hides is not
 * shown.
 */
import { Alert, Anchor, Badge, Code, Group, Loader, Paper, Stack, Text, Title } from '@mantine/core';
import { formatDateTime } from '@medplum/core';
import type { AuditEvent, Communication } from '@medplum/fhirtypes';
import { Document, ResourceName, useMedplum, useResource, useSearchResources } from '@medplum/react';
import type { JSX } from 'react';
import { Link, useParams } from 'react-router';
import { ExportButton } from './export-button.tsx';
import { buildExportBundle, collectConversation, repliesOf } from './export-bundle.ts';
import { PatientDisclosuresLink } from './disclosures-panel.tsx';
import { ReplyDisclosures } from './reply-disclosures.tsx';
import { threadEntries, type ThreadEntry } from './thread-records.ts';
import './review-contrast.css';

export function ThreadPage(): JSX.Element {
  const { id = '' } = useParams();
  const medplum = useMedplum();
  const conversation = useResource<Communication>({ reference: `Communication/${id}` });
  const [records, loading, outcome] = useSearchResources('Communication', { 'part-of': `Communication/${id}`, _sort: 'sent', _count: '200' });
  const entries = threadEntries(records ?? []);
  const disclosed = entries.filter((entry) => entry.shared?.length).map((entry) => `Communication/${entry.id}`);
  const [events] = useSearchResources('AuditEvent', disclosed.length ? { entity: disclosed.join(','), _count: '200', _sort: 'date' } : undefined);
  const patient = conversation?.subject?.reference;
  return (
    <Document className="fhirgate-review">
      <Anchor component={Link} to="/review">
        Back to the review
      </Anchor>
      <Group justify="space-between" my="md">
        <Title order={1}>Conversation</Title>
        <ExportButton
          label="Export this conversation"
          fileName={`conversation-${id}.json`}
          build={async () => buildExportBundle(medplum.getBaseUrl(), await collectConversation(medplum, id))}
        />
      </Group>
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
          {patient?.startsWith('Patient/') && <PatientDisclosuresLink patient={patient} />}
        </Group>
      )}
      {loading && <Loader aria-label="Loading the thread" />}
      {outcome && !records?.length && <Alert color="red" title="The thread could not be read">{outcome.issue?.[0]?.details?.text ?? 'You may not read this conversation.'}</Alert>}
      <Stack aria-label="Thread">
        {entries.map((entry) => (
          <ThreadRecord key={entry.id} entry={entry} events={(events ?? []).filter((event) => repliesOf([event]).includes(`Communication/${entry.id}`))} />
        ))}
      </Stack>
    </Document>
  );
}

function ThreadRecord({ entry, events }: { readonly entry: ThreadEntry; readonly events: readonly AuditEvent[] }): JSX.Element {
  const label = entry.kind === 'prompt' ? 'Prompt' : 'Reply';
  const deIdentified = entry.deIdentifiedRequest !== undefined;
  return (
    <Paper withBorder p="md" aria-label={label} component="article">
      <Group justify="space-between" mb="xs">
        <Text fw={700}>{label}</Text>
        <Group gap="xs">
          {entry.model && <Badge variant="light">{entry.model}</Badge>}
          {deIdentified && <Badge variant="light">de-identified</Badge>}
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
      {entry.kind === 'reply' && (
        <Text size="sm">
          Cost: {entry.costUsd === undefined ? 'no price set for this model' : formatUsd(entry.costUsd)} · Answered in:{' '}
          {entry.latencyMs === undefined ? 'not measured' : formatSeconds(entry.latencyMs)}
        </Text>
      )}
      {entry.patientContext && <SentText title={deIdentified ? 'Patient summary sent to the model (de-identified)' : 'Patient summary sent to the model'} text={entry.patientContext} />}
      {entry.deIdentifiedRequest && <SentText title="Messages as the model got them (de-identified)" text={entry.deIdentifiedRequest} />}
      {entry.request && <SentText title="Request sent by the client" text={entry.request} />}
      {entry.shared && <ReplyDisclosures shared={entry.shared} events={events} />}
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

function formatUsd(value: number): string {
  return `$${value.toFixed(value < 0.01 ? 6 : 4)}`;
}

function formatSeconds(milliseconds: number): string {
  return `${(milliseconds / 1000).toFixed(milliseconds < 10_000 ? 2 : 1)} s`;
}
