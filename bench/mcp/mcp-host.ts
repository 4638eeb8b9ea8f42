/**
 * The standalone host as scenario 12 runs it: its own process (pinned to the contender's core), a fresh data
 * folder, the demo project with `AI_MCP_PATIENT_DATA=allow` (set as its administrator sets it, through
 * `/admin/projects/<id>/settings`), a small chart for Maria Lopez (written by that administrator through the FHIR
 * API), and the demo practitioner's token, the one every measured request carries. The per-caller limits of `/mcp`
 * are lifted (what they cost is still paid: a counter in memory per request); Redis is not used, so sessions and
 * counters are the instance's own and the scenario measures the MCP layer, not Redis.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openHostLog } from '../lib/host-log.ts';
import { standaloneHostArgs, startNodeProcess, stopProcess, waitForOutput } from '../lib/processes.ts';

const run = promisify(execFile);

/** The demo fixture's project and patient in the practitioner's care team (fixtures/demo-project.json). */
export const DEMO_PROJECT_ID = 'a1f0c0de-0000-4000-8000-000000000001';
export const MARIA_LOPEZ_ID = 'a1f0c0de-0000-4000-8000-000000000301';
const PUBLIC_URL = 'http://fhirgate-bench.example.test/';
/** High enough that no measured request is refused; the limits themselves are not what is measured. */
const UNLIMITED = '100000000';

/** Maria Lopez's records the tools answer with. */
export interface BenchChart {
  readonly observationId: string;
}

/** A running host and what the scenario calls it with. */
export interface McpHost {
  readonly url: string;
  readonly process: ChildProcess;
  /** The demo practitioner's (Dr. Carter's) access token. */
  readonly token: string;
  readonly chart: BenchChart;
  readonly close: () => Promise<void>;
}

/** How to start a host: extra Node flags (a profiler), and the checkout it runs from (this one by default). */
export interface McpHostOptions {
  readonly nodeFlags?: readonly string[];
  /** The root of another checkout to run the host and the token command from (a tree before a change, say). */
  readonly tree?: string;
}

/** Starts the host on a free port, allows MCP clients patient data in the demo project and writes the chart. */
export async function startMcpHost(core: number | undefined, options: McpHostOptions = {}): Promise<McpHost> {
  const inTree = (path: string): string => (options.tree ? join(options.tree, path) : path);
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-bench-mcp-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: '0',
    FHIRGATE_BASE_URL: PUBLIC_URL,
    FHIRGATE_DATA_DIR: dataDir,
    FHIRGATE_MCP_REQUESTS_PER_MINUTE: UNLIMITED,
    FHIRGATE_MAX_CONCURRENT_TURNS: '1000',
    AI_PROVIDER: '',
  };
  delete env.REDIS_URL;
  // `npm start`'s log level (info: a line per request), to a file in the data folder (host-log.ts).
  delete env.LOG_LEVEL;
  const log = openHostLog(join(dataDir, 'host.log'));
  const hostArgs = standaloneHostArgs(options.nodeFlags ?? []);
  const child = startNodeProcess([...hostArgs.slice(0, -1), inTree(hostArgs[hostArgs.length - 1])], { core, env, stdio: log.stdio });
  log.started();
  const close = async (): Promise<void> => {
    await stopProcess(child, 20_000);
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    // The banner on stdout names the address.
    const started = await waitForOutput(child, 'stdout', /fhirgate is listening on (\S+)/, 120_000);
    child.stdout?.resume();
    const url = started[1].endsWith('/') ? started[1] : `${started[1]}/`;
    const tokenOf = async (args: readonly string[]): Promise<string> => (await run(process.execPath, [inTree('plugin/hosts/standalone/print-token.ts'), ...args], { env })).stdout.trim();
    const adminToken = await tokenOf(['--admin']);
    await allowPatientData(url, adminToken);
    const chart = await writeChart(url, adminToken);
    return { url, process: child, token: await tokenOf([]), chart, close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function allowPatientData(url: string, adminToken: string): Promise<void> {
  const response = await fetch(`${url}admin/projects/${DEMO_PROJECT_ID}/settings`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify([{ name: 'AI_MCP_PATIENT_DATA', valueString: 'allow' }]),
  });
  if (!response.ok) {
    throw new Error(`project settings: HTTP ${response.status} ${await response.text()}`);
  }
}

/** A problem, a prescription, an allergy and three vital signs: what the summary and the searches answer with. */
async function writeChart(url: string, adminToken: string): Promise<BenchChart> {
  const subject = { reference: `Patient/${MARIA_LOPEZ_ID}` };
  const create = async (resource: Record<string, unknown>): Promise<string> => {
    const response = await fetch(`${url}fhir/R4/${String(resource.resourceType)}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'Content-Type': 'application/fhir+json' },
      body: JSON.stringify(resource),
    });
    if (!response.ok) {
      throw new Error(`writing the chart: HTTP ${response.status} ${await response.text()}`);
    }
    return ((await response.json()) as { id: string }).id;
  };
  const active = (system: string): Record<string, unknown> => ({ coding: [{ system, code: 'active' }] });
  await create({ resourceType: 'Condition', subject, code: { text: 'Essential hypertension' }, clinicalStatus: active('http://terminology.hl7.org/CodeSystem/condition-clinical'), onsetDateTime: '2021-03-04' });
  await create({ resourceType: 'MedicationRequest', status: 'active', intent: 'order', subject, medicationCodeableConcept: { text: 'Lisinopril 10 mg tablet' }, authoredOn: '2021-03-05' });
  await create({ resourceType: 'AllergyIntolerance', patient: subject, clinicalStatus: active('http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical'), code: { text: 'Penicillin' } });
  const heartRate = (day: number, value: number): Record<string, unknown> => ({
    resourceType: 'Observation',
    status: 'final',
    subject,
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }], text: 'Heart rate' },
    effectiveDateTime: `2026-11-${String(day).padStart(2, '0')}T09:00:00Z`,
    valueQuantity: { value, unit: '/min' },
  });
  const observationId = await create(heartRate(1, 72));
  await create(heartRate(8, 75));
  await create(heartRate(15, 70));
  return { observationId };
}
