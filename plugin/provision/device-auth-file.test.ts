import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deviceAuthSchema, resolveDeviceAuth } from '../devices/device-auth-config.ts';
import { readDeviceKey, writeDeviceAuthFile } from './device-auth-file.ts';

describe('the device_auth file fhirgate provision writes', () => {
  let folder: string;
  let file: string;

  beforeEach(async () => {
    folder = await mkdtemp(join(tmpdir(), 'fhirgate-device-auth-'));
    file = join(folder, 'device-auth.json');
  });
  afterEach(() => rm(folder, { recursive: true, force: true }));

  test('is a valid device_auth whose secrets are files of their own, readable by the owner only', async () => {
    expect(writeDeviceAuthFile(file, 'project-1', { id: 'sensor-1', identifierSystem: 'urn:example:devices' })).toBe('created');
    const config = deviceAuthSchema.parse(JSON.parse(await readFile(file, 'utf8')));
    const { config: resolved, warnings } = resolveDeviceAuth(config);
    expect(warnings).toEqual([]);
    expect(resolved).toMatchObject({ projectId: 'project-1', identifierSystem: 'urn:example:devices' });
    expect(resolved.validKeys.get('sensor-1')).toEqual([readDeviceKey(file, 'sensor-1')]);
    expect(resolved.jwtSecrets[0].length).toBeGreaterThanOrEqual(32);
    for (const path of [file, join(folder, 'secrets', 'device-sensor-1.key'), join(folder, 'secrets', 'device-token-signing.key')]) {
      expect((await stat(path)).mode & 0o077).toBe(0);
    }
  });

  test('a second run keeps the keys; another device is added beside them', async () => {
    writeDeviceAuthFile(file, 'project-1', { id: 'sensor-1', identifierSystem: 'urn:example:devices' });
    const before = await readFile(file, 'utf8');
    const key = readDeviceKey(file, 'sensor-1');
    expect(writeDeviceAuthFile(file, 'project-1', { id: 'sensor-1', identifierSystem: 'urn:example:devices' })).toBe('unchanged');
    expect(await readFile(file, 'utf8')).toBe(before);
    expect(writeDeviceAuthFile(file, 'project-1', { id: 'sensor-2', identifierSystem: 'urn:example:devices' })).toBe('device-added');
    expect(readDeviceKey(file, 'sensor-1')).toBe(key);
    expect(readDeviceKey(file, 'sensor-2')).not.toBe(key);
  });

  test("a file of another project or identifier system is left alone, with an error that says so", () => {
    writeDeviceAuthFile(file, 'project-1', { id: 'sensor-1', identifierSystem: 'urn:example:devices' });
    expect(() => writeDeviceAuthFile(file, 'project-2', { id: 'sensor-2', identifierSystem: 'urn:example:devices' })).toThrow(/another project/);
  });
});
