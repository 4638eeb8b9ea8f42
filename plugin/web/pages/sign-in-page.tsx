/** Sign-in: the Medplum server's own login (`SignInForm`: email and password, then the project), as Medplum's app. */
import { Stack, Title } from '@mantine/core';
import { Document, SignInForm } from '@medplum/react';
import type { JSX } from 'react';
import { useNavigate } from 'react-router';

export function SignInPage(): JSX.Element {
  const navigate = useNavigate();
  return (
    <Document width={450}>
      <SignInForm disableGoogleAuth onSuccess={() => navigate('/chat')}>
        <Stack align="center">
          <Title order={1}>Sign in to fhirgate</Title>
        </Stack>
      </SignInForm>
    </Document>
  );
}
