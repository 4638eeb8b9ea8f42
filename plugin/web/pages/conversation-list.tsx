/** The side list of the user's conversations, newest first, each titled by its first prompt; the open one marked. */
import { Alert, NavLink, Stack, Text } from '@mantine/core';
import type { JSX } from 'react';
import { Link } from 'react-router';
import type { ConversationsState } from './use-conversations.ts';

export function ConversationList({ state, openId }: { readonly state: ConversationsState; readonly openId: string | undefined }): JSX.Element {
  return (
    <nav aria-label="Your conversations">
      <Stack gap={2}>
        <NavLink component={Link} to="/chat" label="New conversation" active={!openId} variant="filled" fw={600} />
        {state.conversations?.map((conversation) => (
          <NavLink
            key={conversation.id}
            component={Link}
            to={`/chat?conversation=${conversation.id}`}
            label={conversation.title}
            description={conversation.started ? new Date(conversation.started).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : undefined}
            active={conversation.id === openId}
            variant="filled"
            // Mantine's dimmed grey is too faint on white for WCAG AA; the active link's is its label's, at full strength.
            styles={{ description: { opacity: 1, color: conversation.id === openId ? 'inherit' : 'var(--mantine-color-gray-7)' } }}
            aria-current={conversation.id === openId ? 'page' : undefined}
          />
        ))}
        {state.conversations?.length === 0 && !state.error && (
          <Text size="sm" c="gray.7" p="xs">
            No conversations yet.
          </Text>
        )}
        {state.error && <Alert color="red" title="Your conversations could not be listed">{state.error}</Alert>}
      </Stack>
    </nav>
  );
}
