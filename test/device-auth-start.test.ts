/**
 * A new user's `device_auth`: the spec's three settings alone (`valid_keys`, `jwt_secret`, `token_expiry_minutes`)
 * start the standalone host (the devices are the demo project's, named in `urn:fhirgate:device`), and a setting
 * out of its rules stops it with one line naming the setting and the rule, no stack trace.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MedplumClient } from '@medplum/core';
import { startHostProcess, type HostProcess } from './support/host-process.ts';

const run = promisify(execFile);
const KEY = 'a-new-users-device-key-4f1c9e27b3a8d560';
const SPEC_SETTINGS = { valid_keys: { 'ward-7-monitor': KEY }, jwt_secret: 'a-new-users-signing-secret-0123456789abcdef', token_expiry_minutes: 30 };

describe('device_auth as the spec writes it', () => {
  let dir: string;
  let host: HostProcess;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'fhirgate-device-auth-'));
    await writeFile(join(dir, 'device-auth.json'), JSON.stringify(SPEC_SETTINGS));
    host = await startHostProcess({ FHIRGATE_DATA_DIR: join(dir, 'data'), FHIRGATE_DEVICE_AUTH: join(dir, 'device-auth.json') });
  }, 120_000);

  afterAll(async () => {
    host.child.kill('SIGTERM');
    await new Promise((resolve) => host.child.once('exit', resolve));
    await rm(dir, { recursive: true, force: true });
  });

  const exchange = (): Promise<Response> =>
    fetch(`${host.url}account/api/token/device/`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ device_id: 'ward-7-monitor', api_key: KEY }) });

  test('the three settings start the host; the device is found in the demo project by urn:fhirgate:device', async () => {
    // Configured, but no Device yet: refused as an unknown device (not "not configured").
    expect((await exchange()).status).toBe(403);

    const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts', '--admin-client'], { env: { ...process.env, FHIRGATE_DATA_DIR: join(dir, 'data') } });
    const admin = JSON.parse(stdout) as { client_id: string; client_secret: string };
    const medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(admin.client_id, admin.client_secret);
    await medplum.createResource({ resourceType: 'Device', status: 'active', identifier: [{ system: 'urn:fhirgate:device', value: 'ward-7-monitor' }] });

    const response = await exchange();
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ access: expect.any(String), expires_in: 30 * 60 });
  });

  test('a setting out of its rules stops the host with one line naming it', async () => {
    await writeFile(join(dir, 'bad.json'), JSON.stringify({ ...SPEC_SETTINGS, token_expiry_minutes: 2 }));
    const failure = (await run(process.execPath, ['plugin/hosts/standalone/main.ts'], {
      env: { ...process.env, PORT: '0', FHIRGATE_DATA_DIR: join(dir, 'data-bad'), FHIRGATE_DEVICE_AUTH: join(dir, 'bad.json') },
    }).catch((error: unknown) => error)) as { code?: number; stderr?: string };
    expect(failure.code).toBe(1);
    const lines = (failure.stderr ?? '').split('\n').filter((line) => line.trim() !== '' && !line.startsWith('{'));
    expect(lines).toEqual([expect.stringMatching(/^fhirgate cannot start: Invalid .*device_auth\.token_expiry_minutes: .*>=5/)]);
  });
});
