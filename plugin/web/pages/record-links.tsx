/**
 * Keeps the links Medplum's components draw to a record (`/Patient/<id>`, at the server's root) inside the app:
 * a click on one opens the app's record page instead, read there as the signed-in user.
 */
import { Box } from '@mantine/core';
import type { JSX, MouseEvent, ReactNode } from 'react';
import { useNavigate } from 'react-router';
import { isRecordAddress, recordPath } from './shared-records.ts';

export function RecordLinks({ children }: { readonly children: ReactNode }): JSX.Element {
  const navigate = useNavigate();
  function open(event: MouseEvent): void {
    const anchor = (event.target as HTMLElement).closest('a');
    const [, resourceType, id, rest] = new URL(anchor?.href ?? 'about:blank').pathname.split('/');
    if (anchor && rest === undefined && isRecordAddress(resourceType, id)) {
      event.preventDefault();
      event.stopPropagation();
      navigate(recordPath({ resourceType, id }));
    }
  }
  return <Box onClickCapture={open}>{children}</Box>;
}
