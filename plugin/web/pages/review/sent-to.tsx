/**
 * Where a disclosure's records went, in the disclosures list: the chat's AI model (the model its reply records,
 * read with the reviewer's token, and a link to the conversation) or an MCP client (its declared name and version,
 * and the tool it called). An MCP client's disclosure has no reply in fhirgate: the client's own model answers.
 */
import { Anchor, Code, Stack, Text } from '@mantine/core';
import type { AuditEvent, Communication, Reference } from '@medplum/fhirtypes';
import { useResource } from '@medplum/react';
import { useMemo, type JSX } from 'react';
import { Link } from 'react-router';
import { conversationOfReply, disclosureRecipientOf, modelOfReply } from './disclosure-recipient.ts';

/** The recipient of one disclosure, for its row. */
export function SentTo({ event }: { readonly event: AuditEvent }): JSX.Element {
  const recipient = disclosureRecipientOf(event);
  if (recipient.kind === 'mcp') {
    return (
      <Stack gap={0}>
        <Text size="sm">
          MCP client: <strong>{recipient.client}</strong>
        </Text>
        <Text size="sm">Tool: {recipient.tool ? <Code>{recipient.tool}</Code> : 'not recorded'}</Text>
      </Stack>
    );
  }
  return recipient.reply ? <ModelOfReply reply={recipient.reply} /> : <Text size="sm">AI model</Text>;
}

/** The model a reply records, and its conversation; the reply's reference until (or unless) it can be read. */
function ModelOfReply(props: { readonly reply: string }): JSX.Element {
  const reference = useMemo<Reference<Communication>>(() => ({ reference: props.reply }), [props.reply]);
  const reply = useResource<Communication>(reference);
  const model = reply ? modelOfReply(reply) : undefined;
  const conversation = reply ? conversationOfReply(reply) : undefined;
  return (
    <Stack gap={0}>
      <Text size="sm">
        AI model{model ? ': ' : ''}
        {model ? <strong>{model}</strong> : null}
      </Text>
      {conversation ? (
        // The row opens the conversation too; the link is what a keyboard reaches.
        <Anchor component={Link} to={`/review/conversations/${conversation}`} size="sm" onClick={(event) => event.stopPropagation()}>
          Open the conversation
        </Anchor>
      ) : (
        <Text size="sm">{props.reply}</Text>
      )}
    </Stack>
  );
}
