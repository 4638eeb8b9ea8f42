/**
 * One message of the conversation: who said it, its text (a reply's as Markdown), whether a reply was stopped, a
 * copy button, and under a reply about a patient the records of the chart the model was given.
 */
import { Badge, Button, CopyButton, Group, Paper, Text } from '@mantine/core';
import type { JSX } from 'react';
import { ReplyMarkdown } from './reply-markdown.tsx';
import { SharedRecordsList } from './shared-records-list.tsx';
import type { ChatMessage as Message } from './use-chat.ts';

export function ChatMessage({ message, streaming }: { readonly message: Message; readonly streaming?: boolean }): JSX.Element {
  const fromUser = message.role === 'user';
  return (
    <Paper withBorder p="sm" bg={fromUser ? 'gray.0' : undefined} data-role={message.role} aria-label={fromUser ? 'Your message' : 'Reply'}>
      <Group justify="space-between" gap="xs">
        <Group gap="xs">
          <Text size="xs" c="gray.7" fw={600}>
            {fromUser ? 'You' : 'AI assistant'}
          </Text>
          {message.stopped && <Badge color="gray.8" variant="outline">Stopped</Badge>}
          {message.failed && <Badge color="red.9" variant="filled">Did not finish</Badge>}
        </Group>
        {!fromUser && !streaming && message.text && (
          <CopyButton value={message.text}>
            {({ copied, copy }) => (
              <Button size="compact-xs" variant="default" onClick={copy}>
                {copied ? 'Copied' : 'Copy'}
              </Button>
            )}
          </CopyButton>
        )}
      </Group>
      {fromUser ? <Text style={{ whiteSpace: 'pre-wrap' }}>{message.text}</Text> : <ReplyMarkdown text={message.text} />}
      {!fromUser && message.shared && <SharedRecordsList records={message.shared} />}
    </Paper>
  );
}
