/**
 * A patient's summary for MCP clients, through the SDK's own client: the tool `get_patient_summary` and the resource
 * `fhirgate://Patient/{id}/summary` give the chat's chart summary under the practitioner's AccessPolicy (a record her
 * policy hides is not in it; a patient outside her care team is refused), each on record as a disclosure naming the
 * MCP client; de-identified where the project says so; refused under the project's default rule.
 */
import type { AuditEvent } from '@medplum/fhirtypes';
import { MCP_PATIENT_DATA_SETTING } from '../plugin/mcp/mcp-patient-data.ts';
import { connectMcp, textOf, type McpTestClient } from './support/mcp-test-client.ts';
import { identifyingIn, patientDataProject, type PatientDataProject } from './support/two-model-host.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

const DATE_SHIFT_KEY = 'an-mcp-summary-date-shift-key-of-forty-characters';

describe('MCP server: a patient’s summary', () => {
  let host: TestHost;
  let subject: PatientDataProject;
  let mcp: McpTestClient | undefined;

  beforeAll(async () => {
    host = await startTestHost({ plugin: { deIdentification: { dateShiftKey: DATE_SHIFT_KEY } } });
  });
  afterAll(() => host.close());
  beforeEach(async () => {
    subject = await patientDataProject(host);
    mcp = undefined;
  });
  afterEach(() => mcp?.close());

  const connect = async (): Promise<McpTestClient> => (mcp = await connectMcp(host, subject.project));
  const auditsOf = (patientId: string): Promise<AuditEvent[]> =>
    subject.medplum.searchResources('AuditEvent', { entity: `Patient/${patientId}`, _sort: 'date' }, { cache: 'no-cache' });
  const readResource = async (client: McpTestClient, uri: string): Promise<string> => {
    const { contents } = await client.client.readResource({ uri });
    return contents.map((content) => ('text' in content ? content.text : '')).join('');
  };

  test('where the project allows it: the tool and the resource give the chat’s summary, as the practitioner may read it, each on record', async () => {
    await subject.setSettings({ [MCP_PATIENT_DATA_SETTING]: 'allow' });
    const client = await connect();
    const { resourceTemplates } = await client.client.listResourceTemplates();
    expect(resourceTemplates).toEqual([expect.objectContaining({ uriTemplate: 'fhirgate://Patient/{id}/summary', mimeType: 'text/plain' })]);

    const answer = await client.call('get_patient_summary', { patient_id: subject.patientId });
    expect(answer.isError).toBeUndefined();
    const summary = textOf(answer);
    expect(summary).toContain('<patient-chart>');
    expect(summary).toContain('Maria Lopez, female, born 1958-03-14');
    for (const line of ['Essential hypertension (since 2021-03-04)', 'Lisinopril 10 mg tablet', 'Penicillin', 'Heart rate']) {
      expect(summary).toContain(line);
    }
    // Her AccessPolicy does not grant MedicationStatement: the self-reported medication is not in it.
    expect(summary).not.toContain('St John');

    const resource = await readResource(client, `fhirgate://Patient/${subject.patientId}/summary`);
    expect(resource).toBe(summary);

    const audits = await auditsOf(subject.patientId);
    expect(audits).toHaveLength(2);
    for (const audit of audits) {
      expect(audit.outcomeDesc).toMatch(/^Patient summary answered for the MCP client mcp-test-client 1\.2\.3, through fhirgate's MCP server: \d+ records$/);
      expect(audit.agent[1].who?.display).toBe('MCP client: mcp-test-client 1.2.3');
      const domain = (audit.entity ?? []).filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference);
      expect(domain).toEqual(expect.arrayContaining([`Condition/${subject.chart.condition.id}`, `MedicationRequest/${subject.chart.medication.id}`, `Observation/${subject.chart.pulse.id}`]));
      expect(domain).not.toContain(`MedicationStatement/${subject.chart.statement.id}`);
      expect(audit.entity?.[0].securityLabel).toBeUndefined();
    }
  });

  test('a patient outside her care team: the tool is a tool error, the resource a request error, both saying why, nothing disclosed', async () => {
    await subject.setSettings({ [MCP_PATIENT_DATA_SETTING]: 'allow' });
    const client = await connect();
    const outside = subject.project.ids['patient-outside-care-team'];
    const answer = await client.call('get_patient_summary', { patient_id: outside });
    expect(answer.isError).toBe(true);
    expect(textOf(answer)).toBe(`Patient/${outside} is not a patient the requesting user may see.`);
    await expect(readResource(client, `fhirgate://Patient/${outside}/summary`)).rejects.toThrow(/is not a patient the requesting user may see/);
    expect(textOf(answer)).not.toContain('Okafor');
    expect(await auditsOf(outside)).toHaveLength(0);
  });

  test('by default (the chat’s policy refuses): both refused, saying which setting decides', async () => {
    const client = await connect();
    const answer = await client.call('get_patient_summary', { patient_id: subject.patientId });
    expect(answer.isError).toBe(true);
    expect(textOf(answer)).toContain(MCP_PATIENT_DATA_SETTING);
    await expect(readResource(client, `fhirgate://Patient/${subject.patientId}/summary`)).rejects.toThrow(new RegExp(MCP_PATIENT_DATA_SETTING));
    expect(await auditsOf(subject.patientId)).toHaveLength(0);
  });

  test('de-identified: the tool and the resource, by the handle, hold nothing identifying, and are on record as pseudonymised', async () => {
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    const client = await connect();
    const handle = (await client.json<{ patients: { id: string }[] }>('find_patients', { name: 'Lopez' })).patients[0].id;
    const summary = textOf(await client.call('get_patient_summary', { patient_id: handle }));
    expect(summary).toContain('[GIVEN-1] [FAMILY-1], female, born [age ');
    expect(summary).toContain('Essential hypertension (since ');
    const resource = await readResource(client, `fhirgate://Patient/${handle}/summary`);
    expect(resource).toBe(summary);
    expect(identifyingIn(`${summary}\n${resource}`, subject.patientId)).toEqual([]);
    expect(summary).not.toContain('2021-03-04');
    // The FHIR id is no way in: the resource, like the tool, takes the handle only.
    await expect(readResource(client, `fhirgate://Patient/${subject.patientId}/summary`)).rejects.toThrow(/patient handle/);

    const summaries = (await auditsOf(subject.patientId)).filter((audit) => audit.outcomeDesc?.startsWith('Patient summary'));
    expect(summaries).toHaveLength(2);
    for (const audit of summaries) {
      expect(audit.outcomeDesc).toContain('de-identified');
      expect(audit.entity?.[0].securityLabel).toEqual([expect.objectContaining({ code: 'PSEUDED' })]);
    }
  });
});
