/**
 * `/graphql` costs that fall on everyone, tried on fresh standalone hosts of their own (their own process, data
 * folder, demo device and practitioner), since what is measured (Medplum's whole GraphQL schema, built once per
 * process at the first request that needs it: seconds of CPU in one synchronous call and ~460 MB, for good) is
 * the process's and the suite's shared host may have built it already:
 * - a device token's document beyond its Observations (`{ PatientList { id } }`, a reference read as a Patient):
 *   let through when it is not refused FORBIDDEN before running, when the host's memory grows by the schema's
 *   size, or when a `/healthcheck` sent meanwhile waits for the build;
 * - a user's document that does need the whole schema (a practitioner's `{ PatientList { id } }`): let through
 *   when the build holds the host's other requests (a `/healthcheck` sent meanwhile waits over a second);
 * - a device's mutations in one document (50 aliased `ObservationCreate`s, and other spellings): let through when
 *   more Observations are stored than the device's rate limit allows in a second.
 */
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { readDemoDeviceKey, DEMO_DEVICE } from '../plugin/hosts/standalone/demo-devices.ts';
import { demoToken, startHostProcess, type HostProcess } from '../test/support/host-process.ts';
import type { SecurityContext } from './context.ts';
import type { AttackOutcome } from './suite.ts';

const SCHEMA_KIND = 'graphql schema builds';
const MUTATION_KIND = 'device mutation budget';
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const ISSUER = 'http://fhirgate-security.example.test/';
/** The demo device's rate limit: `rate_limit_per_second`'s default. */
const DEVICE_BUDGET_PER_SECOND = 10;
/** Growth of the host's resident memory that means Medplum's whole schema was built (it takes ~460 MB). */
const SCHEMA_MEMORY_MB = 150;
/** The longest a `/healthcheck` may wait while another request runs; Medplum's schema build holds it 3 s or more. */
const HEALTHCHECK_WAIT_MS = 1000;

/** A fresh host of the attacks' own, and the callers they use on it. */
interface FreshHost {
  readonly process: HostProcess;
  readonly deviceToken: string;
  readonly userToken: string;
  close(): Promise<void>;
}

/** What one `/graphql` request on a fresh host came to, and what it cost the host meanwhile. */
interface Measured {
  readonly status: number;
  readonly body: { data?: unknown; errors?: { message?: string; extensions?: { code?: string } }[] };
  readonly rssGrowthMb: number | undefined;
  readonly longestHealthcheckMs: number;
}

export async function graphqlAttacks(context: SecurityContext): Promise<void> {
  const { log } = context;

  // A device's documents beyond its Observations, first thing on a fresh host: refused before any schema is built.
  const deviceHost = await startFreshHost();
  try {
    const deviceDocuments: [string, string][] = [
      ['{ PatientList { id } } from a device token, on a fresh host', '{ PatientList { id } }'],
      ["a reference read as a Patient from a device token (no schema built before)", '{ ObservationList { subject { resource { ... on Patient { name { family } } } } } }'],
      ['a Practitioner search beside its own Observations, aliased, from a device token', '{ ObservationList { id } staff: PractitionerList { id name { family } } }'],
    ];
    for (const [name, query] of deviceDocuments) {
      await log.run(SCHEMA_KIND, name, async () => {
        const measured = await measureGraphql(deviceHost, deviceHost.deviceToken, query);
        return refusedBeforeAnySchema(measured);
      });
    }

    await mutationAttacks(context, deviceHost);
  } finally {
    await deviceHost.close();
  }

  // A user's document that needs Medplum's whole schema, on a host that has not built it: the build holds no one.
  const userHost = await startFreshHost();
  try {
    await log.run(SCHEMA_KIND, "a practitioner's { PatientList { id } } on a fresh host: a /healthcheck meanwhile waits no longer than a second", async () => {
      const measured = await measureGraphql(userHost, userHost.userToken, '{ PatientList { id } }', { 'X-Project-ID': DEMO_PROJECT });
      const answered = measured.status === 200 && Array.isArray((measured.body.data as { PatientList?: unknown } | undefined)?.PatientList);
      const note = `answered ${answered ? 'with data' : `HTTP ${measured.status}`}; longest /healthcheck meanwhile ${measured.longestHealthcheckMs.toFixed(0)} ms; host memory ${formatGrowth(measured.rssGrowthMb)}`;
      context.log.figure('graphql: first whole-schema document on a fresh host', note);
      return { status: measured.status, letThrough: !answered || measured.longestHealthcheckMs > HEALTHCHECK_WAIT_MS, note };
    });
  } finally {
    await userHost.close();
  }
}

/** A device's mutations, each counted against its rate limit: never more stored in a second than the limit allows. */
async function mutationAttacks(context: SecurityContext, host: FreshHost): Promise<void> {
  const createField = (alias: string): string => `${alias}: ObservationCreate(resource: $input) { id }`;
  const aliased = (count: number): string =>
    `mutation ($input: ObservationInput!) { ${Array.from({ length: count }, (_, index) => createField(`w${index}`)).join(' ')} }`;
  const attacks: [string, () => Promise<number>][] = [
    ['50 aliased ObservationCreates in one document', async () => (await postDevice(host, aliased(50))).stored],
    [
      '50 ObservationCreates in nested inline fragments',
      async () => {
        const nested = Array.from({ length: 10 }, (_, group) => `... { ${Array.from({ length: 5 }, (_, index) => createField(`g${group}w${index}`)).join(' ')} }`).join(' ');
        return (await postDevice(host, `mutation ($input: ObservationInput!) { ${nested} }`)).stored;
      },
    ],
    [
      `${DEVICE_BUDGET_PER_SECOND} aliased ObservationCreates in each of 5 documents sent at once`,
      async () => {
        await Promise.all(Array.from({ length: 5 }, () => postDevice(host, aliased(DEVICE_BUDGET_PER_SECOND), false)));
        await pause(1100);
        return storedNow(host);
      },
    ],
  ];
  for (const [name, attack] of attacks) {
    await context.log.run(MUTATION_KIND, name, async () => {
      const before = await storedNow(host);
      // A second of its own: the budget starts full.
      await pause(1100);
      const stored = (await attack()) - before;
      return {
        status: 0,
        letThrough: stored > DEVICE_BUDGET_PER_SECOND,
        note: `${stored} Observations stored (the device may make ${DEVICE_BUDGET_PER_SECOND} requests or mutations a second)`,
      };
    });
  }
}

/** Let through unless the document was refused FORBIDDEN, nothing of it run, and the host built no schema for it. */
function refusedBeforeAnySchema(measured: Measured): AttackOutcome {
  const codes = (measured.body.errors ?? []).map((error) => error.extensions?.code);
  const refused = !('data' in measured.body) && codes.length === 1 && codes[0] === 'FORBIDDEN';
  const built = (measured.rssGrowthMb ?? 0) > SCHEMA_MEMORY_MB || measured.longestHealthcheckMs > HEALTHCHECK_WAIT_MS;
  const note = `answer ${refused ? 'FORBIDDEN, nothing run' : JSON.stringify(measured.body).slice(0, 160)}; longest /healthcheck meanwhile ${measured.longestHealthcheckMs.toFixed(0)} ms; host memory ${formatGrowth(measured.rssGrowthMb)}`;
  return { status: measured.status, letThrough: !refused || built, note };
}

/** Posts a document with `token`, polling `/healthcheck` until it is answered, and the host's memory before and after. */
async function measureGraphql(host: FreshHost, token: string, query: string, headers: Record<string, string> = {}): Promise<Measured> {
  const before = await residentMb(host.process);
  let done = false;
  let longest = 0;
  const polling = (async () => {
    while (!done) {
      const started = performance.now();
      const response = await fetch(`${host.process.url}healthcheck`);
      await response.arrayBuffer();
      longest = Math.max(longest, performance.now() - started);
      await pause(25);
    }
  })();
  const response = await fetch(`${host.process.url}graphql`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, ...headers },
    body: JSON.stringify({ query }),
  });
  const body = (await response.json()) as Measured['body'];
  done = true;
  await polling;
  const after = await residentMb(host.process);
  return { status: response.status, body, rssGrowthMb: before !== undefined && after !== undefined ? after - before : undefined, longestHealthcheckMs: longest };
}

/**
 * Posts a device document with the demo Observation as `$input`; with `count`, also how many Observations are
 * stored after (counted in the next second, so that the count does not meet the budget the document spent).
 */
async function postDevice(host: FreshHost, query: string, count = true): Promise<{ status: number; stored: number }> {
  const input = {
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    valueQuantity: { value: 72, unit: '/min' },
    device: { identifier: { system: DEMO_DEVICE.identifierSystem, value: DEMO_DEVICE.id } },
  };
  const response = await fetch(`${host.process.url}graphql`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${host.deviceToken}` },
    body: JSON.stringify({ query, variables: { input } }),
  });
  await response.arrayBuffer();
  if (!count) return { status: response.status, stored: 0 };
  await pause(1100);
  return { status: response.status, stored: await storedNow(host) };
}

/**
 * The device's Observations on the fresh host, as the device itself counts them (`ObservationConnection`, one unit
 * of its budget): asked again after a second while its budget of this second is spent.
 */
async function storedNow(host: FreshHost): Promise<number> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const response = await fetch(`${host.process.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${host.deviceToken}` },
      body: JSON.stringify({ query: '{ ObservationConnection { count } }' }),
    });
    const body = (await response.json()) as { data?: { ObservationConnection?: { count?: unknown } } };
    const count = body.data?.ObservationConnection?.count;
    if (typeof count === 'number') return count;
    if (response.status !== 429) throw new Error(`cannot count the stored Observations: HTTP ${response.status} ${JSON.stringify(body).slice(0, 200)}`);
    await pause(1100);
  }
  throw new Error('cannot count the stored Observations: the device stays rate limited');
}

async function startFreshHost(): Promise<FreshHost> {
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-security-graphql-'));
  let child: HostProcess | undefined;
  const close = async (): Promise<void> => {
    if (child && child.child.exitCode === null) {
      const exited = new Promise((resolve) => child?.child.once('exit', resolve));
      child.child.kill('SIGTERM');
      await Promise.race([exited, pause(15_000)]);
      child.child.kill('SIGKILL');
    }
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    child = await startHostProcess({ FHIRGATE_DATA_DIR: dataDir, FHIRGATE_BASE_URL: ISSUER, AI_PROVIDER: '' });
    const exchange = await fetch(`${child.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: DEMO_DEVICE.id, api_key: readDemoDeviceKey(dataDir) }),
    });
    const deviceToken = ((await exchange.json()) as { access?: string }).access;
    if (!deviceToken) throw new Error(`the demo device got no token: HTTP ${exchange.status}`);
    return { process: child, deviceToken, userToken: await demoToken(dataDir, ISSUER), close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** The host process's resident memory in MB (Linux's /proc), or undefined elsewhere. */
async function residentMb(host: HostProcess): Promise<number | undefined> {
  try {
    const status = await readFile(`/proc/${host.child.pid}/status`, 'utf8');
    const kilobytes = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]);
    return Number.isFinite(kilobytes) ? kilobytes / 1024 : undefined;
  } catch {
    return undefined;
  }
}

function formatGrowth(megabytes: number | undefined): string {
  return megabytes === undefined ? 'not measured' : `${megabytes >= 0 ? '+' : ''}${megabytes.toFixed(0)} MB`;
}

function pause(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
