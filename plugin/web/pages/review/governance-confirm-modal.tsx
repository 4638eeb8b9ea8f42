/** The confirmation of a change to the governance settings: what changes, from what to what, before it is sent. */
import { Button, Group, List, Modal, Text } from '@mantine/core';
import type { JSX } from 'react';
import type { SettingEdit } from './governance-data.ts';
import { SETTING_FIELDS } from './governance-fields.ts';

export function GovernanceConfirmModal(props: {
  readonly edits: readonly SettingEdit[] | undefined;
  readonly saving: boolean;
  readonly onConfirm: () => void;
  readonly onCancel: () => void;
}): JSX.Element {
  const { edits, saving, onConfirm, onCancel } = props;
  return (
    // Without Modal's <header>: the app's own header is the page's one banner landmark.
    <Modal.Root opened={edits !== undefined} onClose={onCancel} centered transitionProps={{ duration: 0 }}>
      <Modal.Overlay />
      <Modal.Content>
        <Modal.Body pt="md">
          <Modal.Title fw={700} mb="sm">
            Change the governance settings?
          </Modal.Title>
          <Text mb="sm">These settings apply to everyone in the project from their next request:</Text>
          <List mb="md" aria-label="What changes">
            {(edits ?? []).map((edit) => (
              <List.Item key={edit.name}>
                <Text span fw={600}>
                  {SETTING_FIELDS.find((field) => field.name === edit.name)?.label ?? edit.name}
                </Text>{' '}
                ({edit.name}): {edit.from ?? 'not set'} → {edit.to ?? 'not set'}
              </List.Item>
            ))}
          </List>
          <Text size="sm" c="gray.7" mb="md">
            The change is recorded in the audit trail with your name.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={onCancel} disabled={saving}>
              Cancel
            </Button>
            <Button onClick={onConfirm} loading={saving}>
              Confirm the change
            </Button>
          </Group>
        </Modal.Body>
      </Modal.Content>
    </Modal.Root>
  );
}
