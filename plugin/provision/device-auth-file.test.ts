import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deviceAuthSchema, resolveDeviceAuth } from '../devices/device-auth-config.ts';
import { planDeviceAuthFile, readDeviceKey, writeDeviceAuthFile } from './device-auth-file.ts';

const SENSOR = { id: 'sensor-1', identifierSystem: 'urn:example:devices' };

describe('the device_auth file fhirgate provision writes', () => {
  let folder: string;
  let file: string;

  beforeEach(async () => {
    folder = await mkdtemp(join(tmpdir(), 'fhirgate-device-auth-'));
    file = join(folder, 'device-auth.json');
  });
  afterEach(() => rm(folder, { recursive: true, force: true }));

  /** Every file under the folder with its content: what a run left on disk. */
  async function snapshot(): Promise<Record<string, string>> {
    const entries = await readdir(folder, { recursive: true, withFileTypes: true });
    const files = entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
    return Object.fromEntries(await Promise.all(files.map(async (path) => [path, await readFile(path, 'utf8')] as const)));
  }

  test('is a valid device_auth whose secrets are files of their own, readable by the owner only', async () => {
    expect(writeDeviceAuthFile(file, 'project-1', SENSOR)).toBe('created');
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

  test('everything present: a second run changes nothing; another device is added beside the first', async () => {
    writeDeviceAuthFile(file, 'project-1', SENSOR);
    const before = await snapshot();
    const key = readDeviceKey(file, 'sensor-1');
    expect(writeDeviceAuthFile(file, 'project-1', SENSOR)).toBe('unchanged');
    expect(await snapshot()).toEqual(before);
    expect(writeDeviceAuthFile(file, 'project-1', { ...SENSOR, id: 'sensor-2' })).toBe('device-added');
    expect(readDeviceKey(file, 'sensor-1')).toBe(key);
    expect(readDeviceKey(file, 'sensor-2')).not.toBe(key);
  });

  test('the file gone, its key files still there: the file is made again naming those keys, which stay as they were', async () => {
    writeDeviceAuthFile(file, 'project-1', SENSOR);
    const before = await snapshot();
    const key = readDeviceKey(file, 'sensor-1');
    await rm(file);

    const plan = planDeviceAuthFile(file, 'project-1', SENSOR);
    expect(plan).toMatchObject({ change: 'created', keyFilesCreated: [] });
    expect(plan.keyFilesKept.toSorted()).toEqual([join(folder, 'secrets', 'device-sensor-1.key'), join(folder, 'secrets', 'device-token-signing.key')]);
    expect(writeDeviceAuthFile(file, 'project-1', SENSOR)).toBe('created');
    expect(readDeviceKey(file, 'sensor-1')).toBe(key);
    expect(await snapshot()).toEqual(before);
  });

  test('the file gone and only the signing key left: that key is kept, the device gets a new one', async () => {
    writeDeviceAuthFile(file, 'project-1', SENSOR);
    const signing = await readFile(join(folder, 'secrets', 'device-token-signing.key'), 'utf8');
    await rm(file);
    await rm(join(folder, 'secrets', 'device-sensor-1.key'));

    expect(writeDeviceAuthFile(file, 'project-1', SENSOR)).toBe('created');
    expect(await readFile(join(folder, 'secrets', 'device-token-signing.key'), 'utf8')).toBe(signing);
    expect(readDeviceKey(file, 'sensor-1')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  test('the file there, a key file it names gone: refused before anything is written, saying what to do', async () => {
    writeDeviceAuthFile(file, 'project-1', SENSOR);
    const keyFile = join(folder, 'secrets', 'device-sensor-1.key');
    await rm(keyFile);
    const before = await snapshot();

    for (const device of [SENSOR, { ...SENSOR, id: 'sensor-2' }]) {
      expect(() => writeDeviceAuthFile(file, 'project-1', device)).toThrow(
        `${file} names the key file ${keyFile} (valid_keys.sensor-1), which is missing: restore it, or remove valid_keys.sensor-1 from ${file} and run provision again to make a new one`
      );
    }
    expect(await snapshot()).toEqual(before);

    // Done as the message says, the next run makes the device a new key.
    const config = JSON.parse(before[file]) as { valid_keys: Record<string, string> };
    delete config.valid_keys['sensor-1'];
    await writeFile(file, JSON.stringify(config));
    expect(writeDeviceAuthFile(file, 'project-1', SENSOR)).toBe('device-added');
    expect(readDeviceKey(file, 'sensor-1')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  test('a key file left empty is refused rather than named', async () => {
    writeDeviceAuthFile(file, 'project-1', SENSOR);
    await rm(file);
    await writeFile(join(folder, 'secrets', 'device-sensor-1.key'), '');
    expect(() => writeDeviceAuthFile(file, 'project-1', SENSOR)).toThrow(/is empty/);
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
  });

  test('a file of another project or identifier system is left alone, with an error that says what to do', async () => {
    writeDeviceAuthFile(file, 'project-1', SENSOR);
    const before = await snapshot();
    expect(() => writeDeviceAuthFile(file, 'project-2', { ...SENSOR, id: 'sensor-2' })).toThrow(/holds the devices of project project-1, not of this client's project project-2: give another --device-auth-file$/);
    expect(() => writeDeviceAuthFile(file, 'project-1', { id: 'sensor-2', identifierSystem: 'urn:fhirgate:device' })).toThrow(
      /names its devices in identifier system urn:example:devices: run again with --identifier-system urn:example:devices, or give another --device-auth-file$/
    );
    expect(await snapshot()).toEqual(before);
  });
});
