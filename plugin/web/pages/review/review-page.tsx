/**
 * The review console, for the people accountable for the AI: the project's conversations and the disclosures of
 * patient data, each a `SearchControl` over a FHIR search in a `Document` (as Medplum's AuditEvent page), run with
 * the reviewer's own token, so their AccessPolicy decides what it lists. A conversation opens its thread.
 */
import { Tabs, Title } from '@mantine/core';
import type { SearchRequest } from '@medplum/core';
import { Document, SearchControl } from '@medplum/react';
import { useState, type JSX } from 'react';
import { Route, Routes, useNavigate } from 'react-router';
import { CONVERSATIONS_SEARCH, DISCLOSURES_SEARCH } from './review-searches.ts';
import { ThreadPage } from './thread-page.tsx';
import { UsageTab } from './usage-tab.tsx';
import { GovernanceTab } from './governance-tab.tsx';
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
  const navigate = useNavigate();
  const [conversations, setConversations] = useState<SearchRequest>(CONVERSATIONS_SEARCH);
  const [disclosures, setDisclosures] = useState<SearchRequest>(DISCLOSURES_SEARCH);
  return (
    <Document className="fhirgate-review">
      <Title order={1} mb="md">
        Review
      </Title>
      <Tabs defaultValue="conversations" keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="conversations">Conversations</Tabs.Tab>
          <Tabs.Tab value="disclosures">Disclosures</Tabs.Tab>
          <Tabs.Tab value="usage">Usage and budgets</Tabs.Tab>
          <Tabs.Tab value="governance">Governance</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="conversations" pt="md">
          <SearchControl
            search={conversations}
            onChange={(event) => setConversations(event.definition)}
            onClick={(event) => navigate(`/review/conversations/${event.resource.id ?? ''}`)}
            hideFilters
          />
        </Tabs.Panel>
        <Tabs.Panel value="disclosures" pt="md">
          <SearchControl search={disclosures} onChange={(event) => setDisclosures(event.definition)} onClick={() => undefined} hideFilters />
        </Tabs.Panel>
        <Tabs.Panel value="usage" pt="md">
          <UsageTab />
        </Tabs.Panel>
        <Tabs.Panel value="governance" pt="md">
          <GovernanceTab />
        </Tabs.Panel>
      </Tabs>
    </Document>
  );
}
