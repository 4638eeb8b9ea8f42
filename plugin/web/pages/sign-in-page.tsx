/**
 * Sign-in: the Medplum server's own login (`SignInForm`: email and password, then the project), as Medplum's app;
 * afterwards the page the user asked for (`?next=`), or the chat.
 */
import { Stack, Title } from '@mantine/core';
import { Document, SignInForm } from '@medplum/react';
import type { JSX } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { returnPathOf } from '../sign-in-return.ts';

export function SignInPage(): JSX.Element {
  const navigate = useNavigate();
  const [search] = useSearchParams();
  return (
    <Document width={450}>
      <SignInForm disableGoogleAuth onSuccess={() => navigate(returnPathOf(search.get('next')), { replace: true })}>
        <Stack align="center">
          <Title order={1}>Sign in to fhirgate</Title>
        </Stack>
      </SignInForm>
    </Document>
  );
}
