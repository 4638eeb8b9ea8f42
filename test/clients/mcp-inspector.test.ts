/**
 * The MCP Inspector's command-line mode (`mcp-inspector --cli`, `@modelcontextprotocol/inspector`) against fhirgate's
 * MCP server on the standalone host, run as a CI job runs it: one process per call, `--format json`, the demo
 * practitioner's token as a header. It lists the four tools with schemas it finds portable, calls each, gets a
 * patient outside her care team as a tool error, and without a token stops at the 401 instead of signing in.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MedplumClient } from '@medplum/core';
import type { AuditEvent, Project } from '@medplum/fhirtypes';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import { MCP_PATIENT_DATA_SETTING } from '../../plugin/mcp/mcp-patient-data.ts';
import { seedChart, type SeededChart } from '../support/seeded-chart.ts';
import { startTestHost, type TestHost } from '../support/test-host.ts';

/** The `mcp-inspector` command as npm installs it; run with this Node (the Inspector needs Node 22.19 or later). */
const INSPECTOR = join(process.cwd(), 'node_modules', '.bin', 'mcp-inspector');

/** What one run of the CLI gave: its exit code and its JSON on stdout (the result) and stderr (the error). */
interface InspectorRun {
  readonly exitCode: number;
  readonly result: unknown;
  readonly error: { readonly code?: string; readonly message?: string } | undefined;
}

type ToolResult = { readonly isError?: boolean; readonly content: readonly { readonly type: string; readonly text?: string }[] };

describe('client: the MCP Inspector CLI', () => {
  let host: TestHost;
  let project: SeededProject;
  let chart: SeededChart;
  let medplum: MedplumClient;
  let token: string;
  // The Inspector keeps a catalog, OAuth state and secrets under ~/.mcp-inspector: a home of the test's own.
  let inspectorHome: string;

  beforeAll(async () => {
    host = await startTestHost();
    inspectorHome = await mkdtemp(join(tmpdir(), 'fhirgate-mcp-inspector-'));
  });
  afterAll(async () => {
    await host.close();
    await rm(inspectorHome, { recursive: true, force: true });
  });
  beforeEach(async () => {
    project = await host.seedProject();
    chart = await seedChart(await host.standalone.host.getSystemRepo(project.projectId), project);
    const stored = await host.store.readResource<Project>('Project', project.projectId);
    await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: MCP_PATIENT_DATA_SETTING, valueString: 'allow' }] });
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
    token = await host.accessTokenFor(project.ids['practitioner-membership']);
  });

  /** Runs `mcp-inspector --cli` on the project's MCP URL with `args`, as the practitioner unless `credential` is null. */
  const inspect = (args: readonly string[], credential: string | null = token): Promise<InspectorRun> => {
    const command = ['--cli', '--server-url', `${host.url}projects/${project.projectId}/mcp`, '--transport', 'http', '--format', 'json', ...(credential === null ? [] : ['--header', `Authorization: Bearer ${credential}`]), ...args];
    // No TTY and no browser: an OAuth sign-in is never started, whatever the run meets.
    const env = { ...process.env, HOME: inspectorHome, MCP_INSPECTOR_SECRET_STORE: 'memory', MCP_AUTO_OPEN_ENABLED: 'false' };
    return new Promise((resolve) => {
      execFile(process.execPath, [INSPECTOR, ...command], { env, timeout: 20_000 }, (failure, stdout, stderr) => {
        const exitCode = failure === null ? 0 : typeof failure.code === 'number' ? failure.code : -1;
        resolve({ exitCode, result: parseJson(stdout), error: (parseJson(stderr) as { error?: InspectorRun['error'] } | undefined)?.error });
      });
    });
  };
  const callTool = async (name: string, args: readonly string[]): Promise<InspectorRun & { readonly tool: ToolResult; readonly text: string }> => {
    const run = await inspect(['--method', 'tools/call', '--tool-name', name, ...args]);
    const tool = (run.result as { result: ToolResult }).result;
    return { ...run, tool, text: tool.content.map((part) => part.text ?? '').join('') };
  };
  const auditsOf = (patientId: string): Promise<AuditEvent[]> => medplum.searchResources('AuditEvent', { entity: `Patient/${patientId}`, _sort: 'date' }, { cache: 'no-cache' });

  test('tools/list: the four tools with their input schemas, portable by the Inspector’s --strict check', async () => {
    const run = await inspect(['--method', 'tools/list', '--strict']);
    expect(run.exitCode).toBe(0);
    const { tools } = (run.result as { result: { tools: { name: string; description: string; inputSchema: unknown }[] } }).result;
    expect(tools.map((tool) => tool.name).sort()).toEqual(['find_patients', 'get_patient_summary', 'read_record', 'search_patient_records']);
    const schemaOf = (name: string): unknown => tools.find((tool) => tool.name === name)?.inputSchema;
    expect(schemaOf('find_patients')).toMatchObject({ type: 'object', properties: { name: { type: 'string' }, birthdate: { type: 'string' }, identifier: { type: 'string' } } });
    expect(schemaOf('search_patient_records')).toMatchObject({
      required: ['patient_id', 'resource_type'],
      properties: { resource_type: { enum: expect.arrayContaining(['Observation', 'Condition']) }, params: { type: 'object' } },
    });
    expect(schemaOf('read_record')).toMatchObject({ required: ['patient_id', 'reference'] });
    expect(tools.every((tool) => tool.description.length > 20)).toBe(true);
  });

  test('tools/call of each tool answers as the practitioner may read, and each disclosure is on record', async () => {
    const patientId = project.ids['patient-in-care-team-1'];
    const found = await callTool('find_patients', ['--tool-arg', 'name=Lopez']);
    expect(found.exitCode).toBe(0);
    expect((JSON.parse(found.text) as { patients: unknown[] }).patients).toEqual([expect.objectContaining({ id: patientId, name: ['Maria Lopez'], birthDate: '1958-03-14' })]);

    // params is an object: --tool-args-json passes it as it is.
    const searched = await callTool('search_patient_records', ['--tool-args-json', JSON.stringify({ patient_id: patientId, resource_type: 'Observation', params: { code: 'http://loinc.org|8867-4' } })]);
    expect(searched.exitCode).toBe(0);
    expect((JSON.parse(searched.text) as { records: { id: string }[] }).records.map((record) => record.id)).toEqual([chart.pulse.id]);

    const read = await callTool('read_record', ['--tool-arg', `patient_id=${patientId}`, `reference=Condition/${chart.condition.id}`]);
    expect(read.exitCode).toBe(0);
    expect(read.tool.isError).toBeUndefined();
    expect(read.text).toContain('Essential hypertension');

    const audits = await auditsOf(patientId);
    expect(audits).toHaveLength(3);
    for (const audit of audits) {
      expect(audit.agent[0]).toMatchObject({ who: { reference: `Practitioner/${project.ids.practitioner}` }, requestor: true });
      // The CLI speaks the 2025 protocol unless told otherwise: named at initialize, and its session keeps the name.
      expect(audit.agent[1].who?.display).toBe('MCP client: inspector-cli 2.12.0');
    }
  });

  test('with --protocol-era modern the Inspector declares itself in every request, and the disclosure names it', async () => {
    const patientId = project.ids['patient-in-care-team-1'];
    const read = await callTool('read_record', ['--protocol-era', 'modern', '--tool-arg', `patient_id=${patientId}`, `reference=Patient/${patientId}`]);
    expect(read.exitCode).toBe(0);
    expect(read.text).toContain('Lopez');
    const [audit] = await auditsOf(patientId);
    expect(audit.agent[1].who?.display).toBe('MCP client: inspector-cli 2.12.0');
  });

  test('a patient outside her care team: a tool error saying why (exit 5), and nothing disclosed', async () => {
    const outside = project.ids['patient-outside-care-team'];
    const refused = await callTool('search_patient_records', ['--tool-arg', `patient_id=${outside}`, 'resource_type=Condition']);
    expect(refused.exitCode).toBe(5);
    expect(refused.error?.code).toBe('tool_is_error');
    expect(refused.tool.isError).toBe(true);
    expect(refused.text).toBe(`Patient/${outside} is not a patient the requesting user may see.`);
    expect(await auditsOf(outside)).toHaveLength(0);
  });

  test('without a token: the 401 stops it (exit 3, auth_required, fhirgate’s message)', async () => {
    const run = await inspect(['--method', 'tools/list', '--stored-auth-only'], null);
    expect(run.exitCode).toBe(3);
    expect(run.result).toBeUndefined();
    expect(run.error?.code).toBe('auth_required');
    expect(run.error?.message).toContain('Missing, invalid or expired access token.');
    // A token that is not Medplum's is the same 401.
    const forged = await inspect(['--method', 'tools/list', '--stored-auth-only'], 'not-a-token');
    expect(forged).toMatchObject({ exitCode: 3, error: { code: 'auth_required' } });
  });
});

function parseJson(text: string): unknown {
  try {
    return text.trim() === '' ? undefined : JSON.parse(text);
  } catch {
    return { unparsed: text };
  }
}
