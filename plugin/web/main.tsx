/**
 * The web app's entry: a MedplumClient on the server that serves the app (same origin, the server's own sign-in
 * and token), Mantine's theme and notifications, and the app's routes under the path the app is served at.
 */
import '@mantine/core/styles.css';
import '@mantine/notifications/styles.css';
import '@medplum/react/styles.css';
import { MantineProvider } from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { MedplumClient } from '@medplum/core';
import { MedplumProvider } from '@medplum/react';
import { StrictMode, type JSX } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter, useNavigate } from 'react-router';
import { App } from './app.tsx';
import { appLocation } from './app-location.ts';
import { appPathOf } from './record-navigation.ts';
import { theme } from './theme.ts';

const location = appLocation(document.baseURI, import.meta.url);
// A request the server answers 401 (a session revoked or expired, and not refreshed) clears the session; the app's
// routes then send the user to sign in and back to the page they were on (app.tsx).
const medplum = new MedplumClient({ baseUrl: location.serverUrl });

/** Medplum's client, with its components' links (a record, `/Patient/<id>`) followed inside the app; Mantine. */
function AppProviders(): JSX.Element {
  const navigate = useNavigate();
  return (
    <MedplumProvider medplum={medplum} navigate={(path) => navigate(appPathOf(path))}>
      <MantineProvider theme={theme}>
        <Notifications />
        <App />
      </MantineProvider>
    </MedplumProvider>
  );
}

const root = document.getElementById('root');
if (root) {
  createRoot(root).render(
    <StrictMode>
      <BrowserRouter basename={location.appPath}>
        <AppProviders />
      </BrowserRouter>
    </StrictMode>
  );
}
