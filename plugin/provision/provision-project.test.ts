/**
 * `fhirgate provision` against a real standalone host, run again over whatever an earlier run left behind: it
 * changes nothing that is right, takes back the key files it finds, and when it must refuse, it refuses before it
 * has written anything, on the server or on disk.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MedplumClient } from '@medplum/core';
import { AGENT_DEVICE_IDENTIFIER } from '../chat/fhir-vocabulary.ts';
import { ensureAdminClient } from '../hosts/standalone/admin-client.ts';
import type { SeededProject } from '../hosts/standalone/seed.ts';
import { startTestHost, type TestHost } from '../../test/support/test-host.ts';
import { readDeviceKey } from './device-auth-file.ts';
import { provision } from './provision-command.ts';
import type { ProvisionOptions } from './provision-project.ts';

const SYSTEM = 'urn:fhirgate:device';

describe('fhirgate provision, run again over what an earlier run left', () => {
  let host: TestHost;
  let client: { readonly id: string; readonly secret: string };
  let admin: MedplumClient;
  let folder: string;
  let authFile: string;

  beforeAll(async () => {
    host = await startTestHost();
  });
  afterAll(() => host.close());

  /** A project of the test's own and its administrator's client (a ClientApplication whose membership is `admin`). */
  async function newProject(): Promise<{ project: SeededProject; client: { readonly id: string; readonly secret: string }; admin: MedplumClient }> {
    const project = await host.seedProject();
    const credentials = await ensureAdminClient(host.store, project.projectId, { clientId: randomUUID(), membershipId: randomUUID() });
    const signedIn = new MedplumClient({ baseUrl: host.url, fetch });
    await signedIn.startClientLogin(credentials.id, credentials.secret);
    return { project, client: credentials, admin: signedIn };
  }

  beforeEach(async () => {
    ({ client, admin } = await newProject());
    folder = await mkdtemp(join(tmpdir(), 'fhirgate-provision-'));
    authFile = join(folder, 'device-auth.json');
  });
  afterEach(() => rm(folder, { recursive: true, force: true }));

  const run = (options: ProvisionOptions) => provision(host.url, client.id, client.secret, options);
  const monitor = (id = 'bedside-monitor-7', identifierSystem = SYSTEM): ProvisionOptions => ({ device: { id, identifierSystem, authFile } });

  async function snapshot(): Promise<Record<string, string>> {
    const entries = await readdir(folder, { recursive: true, withFileTypes: true });
    const files = entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
    return Object.fromEntries(await Promise.all(files.map(async (path) => [path, await readFile(path, 'utf8')] as const)));
  }

  const devicesNamed = (id: string, system = SYSTEM) => admin.searchResources('Device', { identifier: `${system}|${id}` }, { cache: 'no-cache' });

  test('a second run changes nothing, on the server or on disk', async () => {
    const options = { ...monitor(), models: ['openai/gpt-4o-mini'], defaultModel: 'openai/gpt-4o-mini' };
    const first = await run(options);
    expect(first.device).toMatchObject({ outcome: 'created', authFileChange: 'created' });
    const files = await snapshot();

    const second = await run(options);
    expect(second.agentDevice).toEqual({ id: first.agentDevice.id, outcome: 'unchanged' });
    expect(Object.values(second.policies).map((policy) => policy.outcome)).toEqual(Object.values(first.policies).map(() => 'unchanged'));
    expect(second.device).toMatchObject({ resourceId: first.device?.resourceId, outcome: 'unchanged', authFileChange: 'unchanged', keyFilesCreated: [], keyFilesKept: [] });
    expect(second.settings).toBe('unchanged');
    expect(await snapshot()).toEqual(files);
    expect(await devicesNamed('bedside-monitor-7')).toHaveLength(1);
  });

  test('the device_auth file gone, its key files still there: the file is made again with the same keys', async () => {
    const first = await run(monitor());
    const key = readDeviceKey(authFile, 'bedside-monitor-7');
    const files = await snapshot();
    await rm(authFile);

    const again = await run(monitor());
    expect(again.device).toMatchObject({ resourceId: first.device?.resourceId, outcome: 'unchanged', authFileChange: 'created', keyFilesCreated: [] });
    expect(again.device?.keyFilesKept).toHaveLength(2);
    expect(readDeviceKey(authFile, 'bedside-monitor-7')).toBe(key);
    expect(await snapshot()).toEqual(files);
  });

  test('a key file the device_auth file names gone: refused before anything is written', async () => {
    await run(monitor());
    await rm(join(folder, 'secrets', 'device-token-signing.key'));
    const files = await snapshot();

    await expect(run(monitor('bedside-monitor-8'))).rejects.toThrow(/device-token-signing\.key \(jwt_secret\), which is missing: restore it, or remove jwt_secret from /);
    expect(await devicesNamed('bedside-monitor-8')).toHaveLength(0);
    expect(await snapshot()).toEqual(files);
  });

  test('a device_auth file of another project or identifier system: refused before the project is touched', async () => {
    await run(monitor('sensor-1', 'urn:example:devices'));
    await rm(join(folder, 'secrets'), { recursive: true });
    const files = await snapshot();
    const other = await newProject();

    const refused = provision(host.url, other.client.id, other.client.secret, monitor('sensor-2'));
    await expect(refused).rejects.toThrow(/holds the devices of project .*: give another --device-auth-file$/);
    // Nothing of provision's in the other project: no agent, no policy, no device.
    const agent = `${AGENT_DEVICE_IDENTIFIER.system}|${AGENT_DEVICE_IDENTIFIER.value}`;
    expect(await other.admin.searchResources('Device', { identifier: agent }, { cache: 'no-cache' })).toHaveLength(0);
    expect(await other.admin.searchResources('Device', { identifier: `${SYSTEM}|sensor-2` }, { cache: 'no-cache' })).toHaveLength(0);
    expect(await other.admin.searchResources('AccessPolicy', { _tag: 'urn:fhirgate:provision|policy-care-team-patient' }, { cache: 'no-cache' })).toHaveLength(0);
    expect(await snapshot()).toEqual(files);

    await expect(run(monitor('sensor-2'))).rejects.toThrow(/run again with --identifier-system urn:example:devices, or give another --device-auth-file$/);
    expect(await devicesNamed('sensor-2')).toHaveLength(0);
  });

  test("a client that is not the project's administrator: told so, and what to tick, before anything is written", async () => {
    const { project, admin: projectAdmin } = await newProject();
    const integration = project.client;
    expect(integration).toBeDefined();
    const refused = provision(host.url, integration?.id ?? '', integration?.secret ?? '', monitor());
    await expect(refused).rejects.toThrow(`The client is not an administrator of project ${project.projectId}: tick Admin on its ProjectMembership`);
    expect(await projectAdmin.searchResources('AccessPolicy', { _tag: 'urn:fhirgate:provision|policy-care-team-patient' }, { cache: 'no-cache' })).toHaveLength(0);
    expect(await snapshot()).toEqual({});
  });
});
