/**
 * Searches answered page by page, through the SDK's own client: beyond the cap on records (`maxResults`) or on an
 * answer's size (`maxCharacters`), an answer carries `next_page`; passed back as `page_token` with the same
 * arguments it gives the next page, until every record has been given once; each page is on record. A token
 * passed with other arguments (another patient, another search) or made up is a tool error: a token is only a
 * position in the search it came from, which runs through the same checks at every page.
 */
import { parseSearchRequest } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AuditEvent, Observation, Patient, Project } from '@medplum/fhirtypes';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { MCP_PATIENT_DATA_SETTING } from '../plugin/mcp/mcp-patient-data.ts';
import { connectMcp, textOf, type McpTestClient } from './support/mcp-test-client.ts';
import { seedChart } from './support/seeded-chart.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

type Page = { count: number; truncated?: boolean; next_page?: string; records?: { id: string }[]; patients?: { id: string }[] };

/** A project whose MCP clients are allowed, with a chart for patient 1 of `extra` more Observations (text of `length`). */
async function pagedProject(host: TestHost, extra: number, length: number): Promise<{ project: SeededProject; system: FhirRepository; observations: string[] }> {
  const project = await host.seedProject();
  const stored = await host.store.readResource<Project>('Project', project.projectId);
  await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: 'allow' }] });
  const system = await host.standalone.host.getSystemRepo(project.projectId);
  const chart = await seedChart(system, project);
  const observations = [chart.pulse.id, chart.hba1c.id];
  for (let index = 0; index < extra; index += 1) {
    const note = await system.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      subject: { reference: `Patient/${project.ids['patient-in-care-team-1']}` },
      code: { text: `Nursing note ${index}` },
      effectiveDateTime: `2026-0${index + 1}-10T08:00:00Z`,
      valueString: `Note ${index}: ${'steady, '.repeat(Math.ceil(length / 8))}`.slice(0, length),
    });
    observations.push(note.id);
  }
  return { project, system, observations };
}

/** Every page of a search, following next_page. */
async function allPages(mcp: McpTestClient, name: string, args: Record<string, unknown>): Promise<Page[]> {
  const pages: Page[] = [];
  let token: string | undefined;
  do {
    const answer = await mcp.call(name, { ...args, ...(token ? { page_token: token } : {}) });
    expect(answer.isError).toBeUndefined();
    pages.push(JSON.parse(textOf(answer)) as Page);
    token = pages.at(-1)?.next_page;
  } while (token !== undefined && pages.length < 20);
  return pages;
}

describe('MCP server: paging beyond the cap on records', () => {
  let host: TestHost;
  let mcp: McpTestClient | undefined;

  beforeAll(async () => {
    host = await startTestHost({ plugin: { patientContext: { tools: { maxResults: 2 } } } });
  });
  afterAll(() => host.close());
  afterEach(() => mcp?.close());

  test('search_patient_records: pages of 2 until every record was given once, each page on record with its offset', async () => {
    const { project, system, observations } = await pagedProject(host, 3, 40);
    mcp = await connectMcp(host, project);
    const patientId = project.ids['patient-in-care-team-1'];
    const args = { patient_id: patientId, resource_type: 'Observation', params: { _sort: 'date' } };
    const pages = await allPages(mcp, 'search_patient_records', args);
    expect(pages.map((page) => page.count)).toEqual([2, 2, 1]);
    expect(pages.map((page) => page.truncated ?? false)).toEqual([true, true, false]);
    const given = pages.flatMap((page) => page.records?.map((record) => record.id) ?? []);
    expect(given.sort()).toEqual([...observations].sort());

    const token = pages[0].next_page;
    for (const other of [
      { ...args, patient_id: project.ids['patient-in-care-team-2'] },
      { ...args, params: { _sort: '-date' } },
      { ...args, resource_type: 'Condition' },
    ]) {
      const refused = await mcp.call('search_patient_records', { ...other, page_token: token });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(/^page_token is not a next_page of this search/);
    }
    for (const made of ['pg1.4.AAAAAAAAAAAAAAAA', 'pg1.99999.AAAAAAAAAAAAAAAA', '4']) {
      expect((await mcp.call('search_patient_records', { ...args, page_token: made })).isError).toBe(true);
    }
    // The offset is not the client's to set as a search parameter either.
    expect((await mcp.call('search_patient_records', { ...args, params: { _offset: '2' } })).isError).toBe(true);

    const audits = await system.searchResources(parseSearchRequest<AuditEvent>('AuditEvent', { entity: `Patient/${patientId}`, _sort: 'date' }));
    const queries = audits.map((audit) => Buffer.from(audit.entity?.find((entity) => entity.role?.code === '24')?.query ?? '', 'base64').toString('utf8'));
    expect(queries).toEqual([expect.not.stringContaining('_offset'), expect.stringContaining('_offset=2'), expect.stringContaining('_offset=4')]);
  });

  test('find_patients: pages of 2, each patient found once and disclosed once', async () => {
    const { project, system } = await pagedProject(host, 0, 0);
    const lopez = [project.ids['patient-in-care-team-1']];
    for (const given of ['Ana', 'Luis', 'Rosa']) {
      lopez.push((await system.createResource<Patient>({ resourceType: 'Patient', name: [{ given: [given], family: 'Lopez' }], birthDate: '1990-01-01' })).id);
    }
    // The integration client's policy reads every Patient.
    mcp = await connectMcp(host, project, { clientKey: true });
    const pages = await allPages(mcp, 'find_patients', { name: 'Lopez' });
    expect(pages.map((page) => page.count)).toEqual([2, 2]);
    expect(pages.flatMap((page) => page.patients?.map((patient) => patient.id) ?? []).sort()).toEqual([...lopez].sort());
    const refused = await mcp.call('find_patients', { name: 'Chen', page_token: pages[0].next_page });
    expect(textOf(refused)).toMatch(/^page_token is not a next_page of this search/);
    for (const id of lopez) {
      expect(await system.searchResources(parseSearchRequest<AuditEvent>('AuditEvent', { entity: `Patient/${id}` }))).toHaveLength(1);
    }
  });
});

describe('MCP server: paging beyond the cap on an answer’s size', () => {
  test('each answer stays within maxCharacters; next_page goes on from the first record left out', async () => {
    const host = await startTestHost({ plugin: { patientContext: { tools: { maxCharacters: 1500 } } } });
    let mcp: McpTestClient | undefined;
    try {
      const { project, observations } = await pagedProject(host, 6, 400);
      mcp = await connectMcp(host, project);
      const answers: string[] = [];
      let token: string | undefined;
      do {
        const answer = await mcp.call('search_patient_records', { patient_id: project.ids['patient-in-care-team-1'], resource_type: 'Observation', ...(token ? { page_token: token } : {}) });
        answers.push(textOf(answer));
        token = (JSON.parse(textOf(answer)) as Page).next_page;
      } while (token !== undefined && answers.length < 20);
      expect(answers.length).toBeGreaterThan(2);
      for (const text of answers) {
        expect(text.length).toBeLessThanOrEqual(1500);
      }
      const given = answers.flatMap((text) => (JSON.parse(text) as Page).records?.map((record) => record.id) ?? []);
      expect(given.sort()).toEqual([...observations].sort());
    } finally {
      await mcp?.close();
      await host.close();
    }
  });
});
