/**
 * MCP clients in a project that gives them patient data de-identified (`AI_MCP_PATIENT_DATA=de-identify`, or unset
 * with `AI_PATIENT_DATA_POLICY=de-identify`), through the SDK's own client: nothing identifying of the patient (name,
 * identifiers, birth date, contacts, address, FHIR id) reaches the client in any answer; the patient is named by a
 * handle that works in the chart tools and nowhere else (altered, forged, another project's: refused); dates agree
 * across answers and the client's own dates are moved back before the store is searched; every disclosure's
 * AuditEvent says the records went pseudonymised. A setting fhirgate does not know is still a configuration error.
 */
import type { AuditEvent } from '@medplum/fhirtypes';
import { MCP_PATIENT_DATA_SETTING } from '../plugin/mcp/mcp-patient-data.ts';
import { connectMcp, textOf, type McpTestClient, type ToolAnswer } from './support/mcp-test-client.ts';
import { identifyingIn, patientDataProject, type PatientDataProject } from './support/two-model-host.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

type Found = { count: number; patients: { id: string; name?: string[]; birthDate?: string; gender?: string; identifier?: { value?: string }[] }[] };
type Records = { count: number; records: ({ id: string; resourceType: string } & Record<string, unknown>)[] };

const DATE_SHIFT_KEY = 'an-mcp-test-date-shift-key-of-forty-characters';

describe('MCP server: de-identified answers', () => {
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

  test("unset, the rule follows AI_PATIENT_DATA_POLICY=de-identify: every answer is free of the patient's identifiers, named by a handle that works in the chart tools", async () => {
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    const client = await connect();
    const answers: ToolAnswer[] = [];
    const answered = async (name: string, args: Record<string, unknown>): Promise<string> => {
      const answer = await client.call(name, args);
      answers.push(answer);
      expect([name, answer.isError]).toEqual([name, undefined]);
      return textOf(answer);
    };

    const found = JSON.parse(await answered('find_patients', { name: 'Lopez' })) as Found;
    expect(found.patients).toHaveLength(1);
    const [listed] = found.patients;
    expect(listed).toEqual({ id: expect.stringMatching(/^ph1_/), name: ['[GIVEN-1] [FAMILY-1]'], birthDate: expect.stringMatching(/^\[age \d+\]$/), gender: 'female', identifier: [{ system: 'urn:oid:2.16.840.1.113883.19.5', value: '[ID-1]' }] });
    // The same handle at every call: the client can keep it.
    expect((JSON.parse(await answered('find_patients', { birthdate: '1958-03-14' })) as Found).patients.map((patient) => patient.id)).toEqual([listed.id]);

    const observations = JSON.parse(await answered('search_patient_records', { patient_id: listed.id, resource_type: 'Observation' })) as Records;
    expect(observations.records.map((record) => record.id).sort()).toEqual([subject.chart.pulse.id, subject.chart.hba1c.id, subject.chart.note.id].sort());
    const note = observations.records.find((record) => record.id === subject.chart.note.id);
    expect(note?.valueString).toMatch(/^\[GIVEN-1\] \[FAMILY-1\] called from \[PHONE-1\] about dizziness since .+; daughter lives at \[ADDRESS-1\]\.$/);
    expect(note?.subject).toEqual({ reference: 'Patient/[PATIENT-1]' });

    const condition = JSON.parse(await answered('read_record', { patient_id: listed.id, reference: `Condition/${subject.chart.condition.id}` })) as Records;
    const onset = String(condition.records[0].onsetDateTime ?? '');
    expect(onset).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(onset).not.toBe('2021-03-04');
    // The Patient itself, by the handle or by the pseudonym the records name it with.
    const byHandle = await answered('read_record', { patient_id: listed.id, reference: `Patient/${listed.id}` });
    const byPseudonym = await answered('read_record', { patient_id: listed.id, reference: 'Patient/[PATIENT-1]' });
    expect(byHandle).toBe(byPseudonym);
    expect(JSON.parse(byHandle)).toMatchObject({ count: 1, records: [{ resourceType: 'Patient', id: '[PATIENT-1]', telecom: [{ value: '[PHONE-1]' }, { value: '[EMAIL-1]' }] }] });

    // The client's dates are on the shifted calendar: a search by the onset it was given finds the condition.
    const byOnset = JSON.parse(await answered('search_patient_records', { patient_id: listed.id, resource_type: 'Condition', params: { 'onset-date': onset } })) as Records;
    expect(byOnset.records.map((record) => record.id)).toEqual([subject.chart.condition.id]);
    // ...and the summary gives the same date as the record did.
    expect(await answered('get_patient_summary', { patient_id: listed.id })).toContain(`Essential hypertension (since ${onset})`);

    const everything = answers.map(textOf).join('\n');
    expect(identifyingIn(everything, subject.patientId)).toEqual([]);
    expect(everything).not.toContain('1958');

    // On record as the real patient, pseudonymised: every entity labelled, the description saying so.
    const audits = await auditsOf(subject.patientId);
    expect(audits).toHaveLength(answers.length);
    for (const audit of audits) {
      expect(audit.entity?.[0]).toMatchObject({ what: { reference: `Patient/${subject.patientId}` }, securityLabel: [{ code: 'PSEUDED' }] });
      expect(audit.outcomeDesc).toContain('de-identified');
      expect(audit.agent[1].who?.display).toBe('MCP client: mcp-test-client 1.2.3');
    }
  });

  test('a handle altered, forged, from another project, or the bare FHIR id, is refused, and nothing is disclosed', async () => {
    await subject.setSettings({ [MCP_PATIENT_DATA_SETTING]: 'de-identify' });
    const client = await connect();
    const [listed] = (await client.json<Found>('find_patients', { name: 'Lopez' })).patients;
    const auditsBefore = (await auditsOf(subject.patientId)).length;

    const other = await patientDataProject(host);
    await other.setSettings({ [MCP_PATIENT_DATA_SETTING]: 'de-identify' });
    const otherClient = await connectMcp(host, other.project);
    const [otherListed] = (await otherClient.json<Found>('find_patients', { name: 'Lopez' })).patients;
    await otherClient.close();
    expect(otherListed.id).not.toBe(listed.id);

    const middle = Math.floor(listed.id.length / 2);
    const altered = `${listed.id.slice(0, middle)}${listed.id[middle] === 'A' ? 'B' : 'A'}${listed.id.slice(middle + 1)}`;
    const forged = `ph1_${Buffer.from(`${subject.patientId}-forged-by-the-client`).toString('base64url')}`;
    for (const patientId of [altered, forged, otherListed.id, subject.patientId]) {
      for (const [name, args] of [
        ['search_patient_records', { resource_type: 'Condition' }],
        ['read_record', { reference: `Condition/${subject.chart.condition.id}` }],
        ['get_patient_summary', {}],
      ] as const) {
        const answer = await client.call(name, { patient_id: patientId, ...args });
        expect([name, patientId, answer.isError]).toEqual([name, patientId, true]);
        expect(textOf(answer)).toMatch(/patient_id must be a patient handle this server gave/);
      }
    }
    expect(await auditsOf(subject.patientId)).toHaveLength(auditsBefore);
  });

  test("AI_MCP_PATIENT_DATA=de-identify overrides the chat's refusing policy; allow gives the chart as it is", async () => {
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'refuse', [MCP_PATIENT_DATA_SETTING]: 'de-identify' });
    const deIdentified = await connect();
    expect(identifyingIn(textOf(await deIdentified.call('find_patients', { name: 'Lopez' })), subject.patientId)).toEqual([]);
    await deIdentified.close();

    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify', [MCP_PATIENT_DATA_SETTING]: 'allow' });
    const allowed = await connect();
    const [listed] = (await allowed.json<Found>('find_patients', { name: 'Lopez' })).patients;
    expect(listed).toMatchObject({ id: subject.patientId, name: ['Maria Lopez'], birthDate: '1958-03-14' });
    const audits = await auditsOf(subject.patientId);
    expect(audits.at(-1)?.entity?.[0].securityLabel).toBeUndefined();
  });

  test.each([
    [{ [MCP_PATIENT_DATA_SETTING]: 'pseudonymise' }, MCP_PATIENT_DATA_SETTING],
    [{ AI_PATIENT_DATA_POLICY: 'anonymise' }, 'AI_PATIENT_DATA_POLICY'],
  ])('a value fhirgate does not know (%o) is a configuration error naming the setting, never an answer', async (settings, named) => {
    await subject.setSettings(settings);
    const token = await host.accessTokenFor(subject.project.ids['practitioner-membership']);
    const response = await fetch(`${host.url}projects/${subject.project.projectId}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'find_patients', arguments: { name: 'Lopez' } } }),
    });
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: { message: string; data: { code: string } } };
    expect(body.error).toMatchObject({ message: expect.stringContaining(named), data: { code: 'not_configured' } });
  });
});

describe('MCP server: de-identify without the server key', () => {
  test('is a tool error asking for the operator, never the records as they are', async () => {
    const host = await startTestHost();
    try {
      const subject = await patientDataProject(host);
      await subject.setSettings({ [MCP_PATIENT_DATA_SETTING]: 'de-identify' });
      const mcp = await connectMcp(host, subject.project);
      const answer = await mcp.call('find_patients', { name: 'Lopez' });
      await mcp.close();
      expect(answer.isError).toBe(true);
      expect(textOf(answer)).toContain('deIdentification.dateShiftKey');
      expect(identifyingIn(textOf(answer), subject.patientId)).toEqual([]);
    } finally {
      await host.close();
    }
  });
});
