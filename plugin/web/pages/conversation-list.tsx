/**
 * The side list of the user's conversations, newest first, each titled by its first prompt; the open one marked;
 * filtered to one patient's when a patient is chosen; older ones a page at a time.
 */
import { Alert, Button, NavLink, Stack, Text } from '@mantine/core';
import type { Patient } from '@medplum/fhirtypes';
import { ResourceName } from '@medplum/react';
import type { JSX } from 'react';
import { Link } from 'react-router';
import { PatientPicker } from './patient-picker.tsx';
import type { ConversationsState } from './use-conversations.ts';

export interface ConversationListProps {
  readonly state: ConversationsState;
  readonly openId: string | undefined;
  /** Called with the patient whose conversations to list, or undefined for all. */
  readonly onFilter: (patient: Patient | undefined) => void;
  readonly filtered: boolean;
}


// Mantine's red title on its light red is too faint for WCAG AA: the title takes red 9.
const READABLE_TITLE = { label: { color: 'var(--mantine-color-red-9)' } };

export function ConversationList({ state, openId, onFilter, filtered }: ConversationListProps): JSX.Element {
  return (
    <nav aria-label="Your conversations">
      <Stack gap={2}>
        <NavLink component={Link} to="/chat" label="New conversation" active={!openId} variant="filled" fw={600} />
        <Stack py="xs">
          <PatientPicker label="Conversations about" onChange={onFilter} />
        </Stack>
        {state.conversations?.map((conversation) => (
          <NavLink
            key={conversation.id}
            component={Link}
            to={`/chat?conversation=${conversation.id}`}
            label={conversation.title}
            description={
              <>
                {conversation.patient && (
                  <>
                    <ResourceName value={conversation.patient} span inherit />
                    {conversation.started ? ' · ' : ''}
                  </>
                )}
                {conversation.started ? new Date(conversation.started).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : ''}
              </>
            }
            active={conversation.id === openId}
            variant="filled"
            // Mantine's dimmed grey is too faint on white for WCAG AA; the active link's is its label's, at full strength.
            styles={{ description: { opacity: 1, color: conversation.id === openId ? 'inherit' : 'var(--mantine-color-gray-7)' } }}
            aria-current={conversation.id === openId ? 'page' : undefined}
          />
        ))}
        {state.conversations?.length === 0 && !state.error && (
          <Text size="sm" c="gray.7" p="xs">
            {filtered ? 'No conversations about this patient.' : 'No conversations yet.'}
          </Text>
        )}
        {state.more && (
          <Button variant="subtle" size="compact-sm" onClick={state.showOlder} loading={state.loadingMore}>
            Show older
          </Button>
        )}
        {state.error && <Alert color="red" styles={READABLE_TITLE} title="Your conversations could not be listed">{state.error}</Alert>}
      </Stack>
    </nav>
  );
}
