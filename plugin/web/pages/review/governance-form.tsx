/**
 * The form a project administrator changes the governance settings with: each setting prefilled with its stored
 * value; *Review the change* shows what changes for confirmation, and only then is it sent, through Medplum's
 * settings route with the whole list (governance-data.ts). Shown to administrators only: the server refuses anyone
 * else (403), whatever a page shows.
 */
import { Button, Select, SimpleGrid, Stack, TextInput } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMedplum } from '@medplum/react';
import { useState, type JSX } from 'react';
import { changeSettings, type Governance, type SettingEdit } from './governance-data.ts';
import { GovernanceConfirmModal } from './governance-confirm-modal.tsx';
import { editsBetween, SETTING_FIELDS, valuesOf } from './governance-fields.ts';

// Mantine's description grey is below WCAG AA contrast on white (axe's color-contrast rule).
const DESCRIPTION_STYLES = { description: { color: 'var(--mantine-color-gray-7)' } };

export function GovernanceForm({ governance, onChanged }: { readonly governance: Governance; readonly onChanged: () => void }): JSX.Element {
  const medplum = useMedplum();
  const stored = valuesOf(governance.settings);
  const [form, setForm] = useState<Record<string, string | undefined>>(stored);
  const [pending, setPending] = useState<SettingEdit[] | undefined>(undefined);
  const [saving, setSaving] = useState(false);
  const edits = editsBetween(stored, form);

  const confirm = (): void => {
    if (!pending) {
      return;
    }
    setSaving(true);
    changeSettings(medplum, governance.project_id, pending)
      .then(() => {
        notifications.show({ color: 'green', title: 'Settings changed', message: 'They apply from the next request, and the change is in the audit trail.' });
        setPending(undefined);
        onChanged();
      })
      .catch((error: unknown) => notifications.show({ color: 'red', title: 'The settings were not changed', message: (error as Error).message }))
      .finally(() => setSaving(false));
  };

  return (
    <form
      aria-label="Change the governance settings"
      onSubmit={(event) => {
        event.preventDefault();
        setPending(edits);
      }}
    >
      <Stack>
        <SimpleGrid cols={{ base: 1, sm: 2 }}>
          {SETTING_FIELDS.map((field) =>
            field.choices ? (
              <Select
                key={field.name}
                label={field.label}
                description={`${field.description} (${field.name})`}
                placeholder="Not set (the default)"
                data={field.choices.map((choice) => ({ value: choice.value, label: choice.label }))}
                value={form[field.name] ?? null}
                onChange={(value) => setForm({ ...form, [field.name]: value ?? undefined })}
                clearable
                styles={DESCRIPTION_STYLES}
              />
            ) : (
              <TextInput
                key={field.name}
                label={field.label}
                description={`${field.description} (${field.name})`}
                value={form[field.name] ?? ''}
                onChange={(event) => setForm({ ...form, [field.name]: event.currentTarget.value })}
                styles={DESCRIPTION_STYLES}
              />
            )
          )}
        </SimpleGrid>
        <Button type="submit" disabled={edits.length === 0} style={{ alignSelf: 'flex-start' }}>
          Review the change
        </Button>
      </Stack>
      <GovernanceConfirmModal edits={pending} saving={saving} onConfirm={confirm} onCancel={() => setPending(undefined)} />
    </form>
  );
}
