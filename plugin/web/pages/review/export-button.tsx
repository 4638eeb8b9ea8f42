/** A button that builds an export (a FHIR Bundle) and offers it as a download; says so when it cannot be built. */
import { Button, Text } from '@mantine/core';
import { normalizeErrorString } from '@medplum/core';
import type { Bundle } from '@medplum/fhirtypes';
import { useState, type JSX } from 'react';
import { downloadBundle } from './export-bundle.ts';

export function ExportButton(props: { readonly label: string; readonly fileName: string; readonly build: () => Promise<Bundle> }): JSX.Element {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const run = async (): Promise<void> => {
    setBusy(true);
    setError(undefined);
    try {
      downloadBundle(await props.build(), props.fileName);
    } catch (caught) {
      setError(`The export could not be made: ${normalizeErrorString(caught)}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <Button variant="default" loading={busy} onClick={() => void run()}>
        {props.label}
      </Button>
      {error && (
        <Text role="alert" c="red.8" size="sm">
          {error}
        </Text>
      )}
    </>
  );
}
