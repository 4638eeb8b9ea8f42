/**
 * The bar above every signed-in page: the app's name, its two places (Chat, for clinicians; Review, for the people
 * accountable), who is signed in, and Sign out, which ends the session on the server (`/oauth2/logout`).
 */
import { Anchor, Button, Group, Text } from '@mantine/core';
import { ResourceName, useMedplum, useMedplumProfile } from '@medplum/react';
import type { JSX } from 'react';
import { NavLink, useNavigate } from 'react-router';

const PLACES = [
  { to: '/chat', label: 'Chat' },
  { to: '/review', label: 'Review' },
] as const;

export function AppHeader(): JSX.Element {
  const medplum = useMedplum();
  const profile = useMedplumProfile();
  const navigate = useNavigate();

  function signOut(): void {
    // The session ends locally even when the server cannot be reached.
    medplum
      .signOut()
      .catch(() => medplum.clear())
      .finally(() => navigate('/signin'));
  }

  return (
    <header>
      <Group justify="space-between" px="md" py="xs" style={{ borderBottom: '1px solid var(--mantine-color-gray-3)' }}>
        <Group gap="lg">
          <Text fw={700}>fhirgate</Text>
          <nav aria-label="fhirgate">
            <Group gap="md">
              {PLACES.map((place) => (
                <Anchor key={place.to} component={NavLink} to={place.to} c="blue.8" fw={500}>
                  {place.label}
                </Anchor>
              ))}
            </Group>
          </nav>
        </Group>
        <Group gap="sm">
          {profile && (
            <Text size="sm">
              <ResourceName value={profile} />
            </Text>
          )}
          <Button variant="default" size="xs" onClick={signOut}>
            Sign out
          </Button>
        </Group>
      </Group>
    </header>
  );
}
