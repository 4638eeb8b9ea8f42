/** One message of the conversation: who said it, and its text as written. */
import { Paper, Text } from '@mantine/core';
import type { JSX } from 'react';
import type { ChatMessage as Message } from './use-chat.ts';

export function ChatMessage({ message }: { readonly message: Message }): JSX.Element {
  const fromUser = message.role === 'user';
  return (
    <Paper withBorder p="sm" bg={fromUser ? 'gray.0' : undefined} data-role={message.role} aria-label={fromUser ? 'Your message' : 'Reply'}>
      <Text size="xs" c="gray.7" fw={600}>
        {fromUser ? 'You' : 'AI assistant'}
      </Text>
      <Text style={{ whiteSpace: 'pre-wrap' }}>{message.text}</Text>
    </Paper>
  );
}
