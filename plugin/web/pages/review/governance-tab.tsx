/**
 * The review console's governance settings, for every reviewer (`GET /v1/governance`: what the project's rules are,
 * never its secrets): which models may see patient data and what happens on the others, who may use which model, the
 * budgets, every governance setting as stored, and the audit trail of their changes. A project administrator also
 * gets the form that changes them; anyone else gets no control (and the server would refuse them).
 */
import { Alert, Badge, Loader, Stack, Table, Text, Title } from '@mantine/core';
import { SearchControl, useMedplum } from '@medplum/react';
import { useState, type JSX } from 'react';
import { useGovernance, type Governance, type PatientDataTreatment } from './governance-data.ts';
import { GovernanceForm } from './governance-form.tsx';
import { SETTINGS_CHANGES_SEARCH } from './governance-searches.ts';

const TREATMENT: Readonly<Record<PatientDataTreatment, string>> = {
  cleared: 'Sent as it is (cleared)',
  'de-identified': 'Sent de-identified',
  refused: 'Refused',
};

export function GovernanceTab(): JSX.Element {
  const medplum = useMedplum();
  const { governance, error, reload } = useGovernance();
  const [changes, setChanges] = useState(SETTINGS_CHANGES_SEARCH);
  const [version, setVersion] = useState(0);
  if (error) {
    return <Alert color="red" title="The governance settings could not be read">{error}</Alert>;
  }
  if (!governance) {
    return <Loader aria-label="Reading the governance settings" />;
  }
  return (
    <Stack gap="lg">
      {governance.problems.map((problem) => (
        <Alert key={problem.setting} color="red" title={`${problem.setting} does not parse`}>
          {problem.message} Chat requests in the project are refused until it is fixed.
        </Alert>
      ))}
      <PatientData governance={governance} />
      <section aria-labelledby="governance-access">
        <Title order={2} size="h4" id="governance-access" mb="xs">
          Model access
        </Title>
        <Text>{governance.model_access === 'access-policy' ? 'Each member may use the models their AccessPolicies grant.' : 'Every member may use every model of the project.'}</Text>
      </section>
      <section aria-labelledby="governance-stored">
        <Title order={2} size="h4" id="governance-stored" mb="xs">
          Settings as stored
        </Title>
        {governance.settings.length === 0 ? (
          <Text>None: every rule has its default.</Text>
        ) : (
          <Table striped aria-label="Governance settings as stored">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Setting</Table.Th>
                <Table.Th>Value</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {governance.settings.map((setting) => (
                <Table.Tr key={setting.name}>
                  <Table.Td>{setting.name}</Table.Td>
                  <Table.Td>{setting.value ?? ''}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
      </section>
      {governance.can_change ? (
        <section aria-labelledby="governance-change">
          <Title order={2} size="h4" id="governance-change" mb="xs">
            Change the settings
          </Title>
          <GovernanceForm
            key={governance.settings.map((setting) => `${setting.name}=${setting.value ?? ''}`).join('\n')}
            governance={governance}
            onChanged={() => {
              // MedplumClient keeps search results a while: the list of changes must be read again.
              medplum.invalidateSearches('AuditEvent');
              reload();
              setVersion(version + 1);
            }}
          />
        </section>
      ) : (
        <Text size="sm" c="gray.7">
          A project administrator changes these settings; each change is recorded below.
        </Text>
      )}
      <section aria-labelledby="governance-changes">
        <Title order={2} size="h4" id="governance-changes" mb="xs">
          Changes
        </Title>
        <SearchControl key={version} search={changes} onChange={(event) => setChanges(event.definition)} onClick={() => undefined} hideFilters hideToolbar />
      </section>
    </Stack>
  );
}

function PatientData({ governance }: { readonly governance: Governance }): JSX.Element {
  const patientData = governance.patient_data;
  return (
    <section aria-labelledby="governance-patient-data">
      <Title order={2} size="h4" id="governance-patient-data" mb="xs">
        Patient data
      </Title>
      {patientData ? (
        <>
          <Text mb="xs">
            On a model not cleared for patient data, a question about a patient is{' '}
            <strong>{patientData.policy === 'de-identify' ? 'sent de-identified' : 'refused'}</strong>. The project&apos;s list of cleared models:{' '}
            {patientData.project_models === null ? "none of its own (the server's list applies)" : patientData.project_models.join(', ') || 'none'}.
          </Text>
          <Table striped aria-label="What a question about a patient does on each model">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Model</Table.Th>
                <Table.Th>A question about a patient</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {patientData.models.map((model) => (
                <Table.Tr key={model.id}>
                  <Table.Td>{model.id}</Table.Td>
                  <Table.Td>
                    <Badge variant="light" color={model.patient_data === 'refused' ? 'red' : model.patient_data === 'cleared' ? 'green' : 'blue'}>
                      {TREATMENT[model.patient_data]}
                    </Badge>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </>
      ) : (
        <Text>A patient data setting does not parse (above).</Text>
      )}
    </section>
  );
}
