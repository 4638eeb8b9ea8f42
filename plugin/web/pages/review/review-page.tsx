/**
 * The review console, for the people accountable for the AI: the project's conversations, the disclosures of
 * patient data and the device sign-ins, each a `SearchControl` over a FHIR search in a `Document` (as Medplum's
 * AuditEvent page), run with the reviewer's own token, so their AccessPolicy decides what it lists. A conversation
 * opens its thread. The tab (and a patient's disclosures) can be linked: `?tab=disclosures&patient=<id>`.
 */
import { Tabs, Title } from '@mantine/core';
import { Document } from '@medplum/react';
import type { JSX } from 'react';
import { Route, Routes, useSearchParams } from 'react-router';
import { ConversationsPanel } from './conversations-panel.tsx';
import { DevicesPanel } from './devices-panel.tsx';
import { DisclosuresPanel } from './disclosures-panel.tsx';
import { ThreadPage } from './thread-page.tsx';
import './review-contrast.css';

export function ReviewPage(): JSX.Element {
  return (
    <Routes>
      <Route path="conversations/:id" element={<ThreadPage />} />
      <Route path="*" element={<ReviewLists />} />
    </Routes>
  );
}

function ReviewLists(): JSX.Element {
  const [params, setParams] = useSearchParams();
  const patient = params.get('patient') ?? undefined;
  return (
    <Document className="fhirgate-review">
      <Title order={1} mb="md">
        Review
      </Title>
      <Tabs value={params.get('tab') ?? 'conversations'} onChange={(tab) => setParams(tab ? { tab } : {})} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="conversations">Conversations</Tabs.Tab>
          <Tabs.Tab value="disclosures">Disclosures</Tabs.Tab>
          <Tabs.Tab value="devices">Devices</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="conversations" pt="md">
          <ConversationsPanel />
        </Tabs.Panel>
        <Tabs.Panel value="disclosures" pt="md">
          <DisclosuresPanel initial={patient ? { patient } : undefined} />
        </Tabs.Panel>
        <Tabs.Panel value="devices" pt="md">
          <DevicesPanel />
        </Tabs.Panel>
      </Tabs>
    </Document>
  );
}
