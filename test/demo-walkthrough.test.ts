/**
 * The demo as the README, docs/governance.md and docs/devices.md walk a newcomer through it, against `npm start`'s host (its own
 * process, the demo project loaded), each step the page's own text run from a user's shell (only the host's address
 * changed): the demo device's reading lands in Maria Lopez's chart, where Dr. Carter sees it and her next turn about
 * Maria takes it in; `npm run -s token -- --admin` gives the project administrator's token the usage report and the
 * settings calls need; the settings change as the page shows, with curl and with its MedplumClient snippet.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MedplumClient } from '@medplum/core';
import type { Bundle, Communication, Device, Observation, Project, ProjectSetting } from '@medplum/fhirtypes';
import { startHostProcess, type HostProcess } from './support/host-process.ts';
import { usersShell } from './support/users-shell.ts';
import { waitFor } from './support/wait-for.ts';

const run = promisify(execFile);

const DOCUMENTED_URL = 'http://127.0.0.1:8103/';
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const MARIA = 'Patient/a1f0c0de-0000-4000-8000-000000000301';

/** The fenced block of `lang` in `file` that starts with `firstLine`. */
async function blockOf(file: string, lang: 'sh' | 'ts', firstLine: string): Promise<string> {
  const blocks = [...(await readFile(file, 'utf8')).matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, 'g'))].map(([, code]) => code);
  const block = blocks.find((code) => code.startsWith(firstLine));
  if (!block) {
    throw new Error(`${file} has no ${lang} block starting "${firstLine}"`);
  }
  return block;
}

describe("the demo's walk-through, as the pages write it", () => {
  let dataDir: string;
  let host: HostProcess;
  let token: string;
  let adminToken: string;

  /** Runs a page's shell lines as a user's shell does, against this host. */
  const shell = async (lines: string, environment: Record<string, string> = {}): Promise<string> => {
    const { stdout } = await run('sh', ['-c', lines.replaceAll(DOCUMENTED_URL, host.url)], { env: { ...usersShell(), FHIRGATE_DATA_DIR: dataDir, ...environment } });
    return stdout;
  };
  const modelsOf = async (bearer: string): Promise<{ id: string; fhirgate?: { patient_data?: string } }[]> => {
    const response = await fetch(`${host.url}v1/models`, { headers: { Authorization: `Bearer ${bearer}`, 'X-Project-ID': DEMO_PROJECT } });
    return ((await response.json()) as { data: { id: string; fhirgate?: { patient_data?: string } }[] }).data;
  };
  const settingsOf = async (): Promise<ProjectSetting[] | undefined> => {
    const response = await fetch(`${host.url}admin/projects/${DEMO_PROJECT}`, { headers: { Authorization: `Bearer ${adminToken}` } });
    return ((await response.json()) as { project: Project }).project.setting;
  };
  const demoModelFor = (patientData: string) => () =>
    modelsOf(token).then((models) => (models.find((model) => model.id === 'demo/echo')?.fhirgate?.patient_data === patientData ? true : undefined));

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-walk-'));
    host = await startHostProcess({ FHIRGATE_DATA_DIR: dataDir });
    token = (await shell('npm run -s token')).trim();
    adminToken = (await shell('npm run -s token -- --admin')).trim();
  }, 120_000);

  afterAll(async () => {
    host.child.kill('SIGTERM');
    await new Promise((resolve) => host.child.once('exit', resolve));
    await rm(dataDir, { recursive: true, force: true });
  });

  test("README: the demo device's Observation is filed in Maria Lopez's chart; Dr. Carter reads it, and her turn about Maria takes it in", async () => {
    const posted = JSON.parse(await shell(await blockOf('README.md', 'sh', 'ACCESS=$(curl'))) as { data?: { ObservationCreate?: Observation }; errors?: unknown };
    expect(posted.errors).toBeUndefined();
    const observation = posted.data?.ObservationCreate;
    expect(observation?.subject?.reference).toBe(MARIA);

    const chart = JSON.parse(await shell(await blockOf('README.md', 'sh', `curl -s "${DOCUMENTED_URL}fhir/R4/Observation?subject=`), { TOKEN: token })) as Bundle<Observation>;
    expect(chart.entry?.map((entry) => entry.resource?.id)).toContain(observation?.id);

    const answer = JSON.parse(await shell(await blockOf('README.md', 'sh', `curl -s ${DOCUMENTED_URL}v1/chat/completions`), { TOKEN: token })) as { communication_id: string };
    const reply = (await (await fetch(`${host.url}fhir/R4/Communication/${answer.communication_id}`, { headers: { Authorization: `Bearer ${token}` } })).json()) as Communication;
    expect(reply.about?.map((reference) => reference.reference)).toContain(`Observation/${observation?.id}`);
  });

  test("README: the openai SDK snippet, run with node in the shell where the token line was run", async () => {
    const tokenLine = (await blockOf('README.md', 'sh', 'export TOKEN=$(npm run -s token)')).split('\n')[0];
    const snippet = await blockOf('README.md', 'ts', "import OpenAI from 'openai';\n\nconst openai");
    const environment = { SNIPPET: snippet.replaceAll(DOCUMENTED_URL, host.url) };
    // The user's shell: the token line, then the snippet with the machine's node (the page says to save it as chat.mjs).
    const output = await shell(`${tokenLine}\nnode --input-type=module -e "$SNIPPET"`, environment);
    expect(output).toBe('Echo: Hello');
  });

  test("README: the MCP Inspector's command lists the MCP tools as Dr. Carter; the SDK snippet's find_patients is refused until the project allows MCP clients", async () => {
    const listed = JSON.parse(await shell(await blockOf('README.md', 'sh', 'npx @modelcontextprotocol/inspector@2.12.0 --cli'))) as { result: { tools: { name: string }[] } };
    expect(listed.result.tools.map((tool) => tool.name).sort()).toEqual(['find_patients', 'get_patient_summary', 'read_record', 'search_patient_records']);

    const snippet = await blockOf('README.md', 'ts', "import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';");
    const environment = { SNIPPET: `${snippet.replaceAll(DOCUMENTED_URL, host.url)}\nconsole.log(JSON.stringify(found));` };
    const found = JSON.parse(await shell(`export TOKEN=$(npm run -s token)\nnode --input-type=module -e "$SNIPPET"`, environment)) as { isError?: boolean; content: { text: string }[] };
    expect(found.isError).toBe(true);
    expect(found.content[0].text).toContain('AI_MCP_PATIENT_DATA');
  });

  test("devices.md: the PATCH block, with the ids the page gives for the demo device and Maria Lopez, assigns the device", async () => {
    const page = await readFile('docs/devices.md', 'utf8');
    const [, deviceId, patientId] = /whose resource id is\s+`([0-9a-f-]+)`, comes assigned to Maria Lopez, `([0-9a-f-]+)`/.exec(page) ?? [];
    const block = (await blockOf('docs/devices.md', 'sh', 'curl -s -X PATCH')).replace('<device resource id>', deviceId).replace('<patient id>', patientId);
    const device = JSON.parse(await shell(`ADMIN_TOKEN=$(npm run -s token -- --admin)\n${block}`)) as Device;
    expect(device.identifier).toContainEqual({ system: 'urn:fhirgate:demo:device', value: 'demo-monitor-1' });
    expect(device.patient?.reference).toBe(MARIA);
  });

  test('governance.md: the usage report with the token of npm run -s token -- --admin; Dr. Carter gets her own', async () => {
    const report = JSON.parse(await shell(await blockOf('docs/governance.md', 'sh', 'ADMIN_TOKEN=$(npm run -s token -- --admin)   #'))) as {
      object: string; project_id: string; start: string; end: string; data: { user?: string }[];
    };
    expect(report).toMatchObject({ object: 'usage_report', project_id: DEMO_PROJECT });
    // This month so far, with the turns the steps above made.
    expect(report.start).toBe(`${report.end.slice(0, 7)}-01`);
    expect(report.data.map((row) => row.user)).toContain('Practitioner/a1f0c0de-0000-4000-8000-000000000201');
    // Dr. Carter's own report counts the replies she may read: her own.
    const own = await fetch(`${host.url}v1/usage`, { headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': DEMO_PROJECT } });
    expect(own.status).toBe(200);
    expect(new Set(((await own.json()) as { data: { user?: string }[] }).data.map((row) => row.user))).toEqual(new Set(['Practitioner/a1f0c0de-0000-4000-8000-000000000201']));
  });

  test("governance.md: the project's settings changed with curl, then with the MedplumClient snippet, which keeps the others", async () => {
    // The curl block: its one entry replaces the list.
    await shell(await blockOf('docs/governance.md', 'sh', 'ADMIN_TOKEN=$(npm run -s token -- --admin)\nPROJECT='));
    expect(await settingsOf()).toEqual([{ name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }]);

    // A project that clears no model and refuses turns about a patient on the others: the demo model is refused.
    await fetch(`${host.url}admin/projects/${DEMO_PROJECT}/settings`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify([
        { name: 'AI_PATIENT_DATA_MODELS', valueString: 'none' },
        { name: 'AI_PATIENT_DATA_POLICY', valueString: 'refuse' },
      ]),
    });
    await waitFor(demoModelFor('refused'), 15_000);

    // The snippet, as written, run with the project's Node in the shell where the page's token line was run.
    const page = await readFile('docs/governance.md', 'utf8');
    const tokenLine = /^- on the standalone host: `(.+?)`/m.exec(page)?.[1];
    expect(tokenLine).toContain('ADMIN_TOKEN=$(npm run -s token -- --admin)');
    const snippet = await blockOf('docs/governance.md', 'ts', "import { MedplumClient } from '@medplum/core';\nimport type { Project, ProjectSetting }");
    await shell(`${tokenLine}\nnode_modules/.bin/node --input-type=module-typescript -e "$SNIPPET"`, { SNIPPET: snippet.replaceAll(DOCUMENTED_URL, host.url) });
    expect(await settingsOf()).toEqual([
      { name: 'AI_PATIENT_DATA_MODELS', valueString: 'none' },
      { name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' },
    ]);
    // And it applies: Dr. Carter's turns about a patient now go to the demo model de-identified.
    await waitFor(demoModelFor('de-identified'), 15_000);

    // What the page says not to use on this host: the Project through the FHIR API is refused, even to its administrator.
    const medplum = new MedplumClient({ baseUrl: host.url, fetch });
    medplum.setAccessToken(adminToken);
    const project = await medplum.readResource('Project', DEMO_PROJECT);
    await expect(medplum.updateResource({ ...project, setting: [] })).rejects.toThrow('Forbidden');
  });
});
