import { describe, expect, test } from '@jest/globals';
import { deviceAuthSchema, resolveDeviceAuth, type DeviceAuthInput } from './device-auth-config.ts';
import { createNetworkList, parseNetwork, type ParsedNetwork } from './device-networks.ts';

function listOf(...entries: string[]) {
  return createNetworkList(entries, entries.map((entry) => parseNetwork(entry) as ParsedNetwork));
}

describe('parseNetwork', () => {
  test.each(['10.1.2.3', '10.1.2.0/24', '0.0.0.0/0', 'fd00::7', 'fd00:1::/64', '::ffff:10.1.2.0/120', ' 192.168.0.0/16 '])('reads %p', (entry) => {
    expect(parseNetwork(entry)).toBeDefined();
  });

  test.each(['', 'ward-3', '10.1.2', '10.1.2.300', '10.1.2.0/33', 'fd00::/129', '10.1.2.0/-1', '10.1.2.0/24/8', '10.1.2.0/', '10.1.2.0/2x', 'fd00::g'])(
    'refuses %p',
    (entry) => {
      expect(parseNetwork(entry)).toBeUndefined();
    },
  );
});

describe('a network list', () => {
  test('admits the addresses of its ranges and its single addresses, and nothing else', () => {
    const list = listOf('10.1.2.0/24', '192.168.7.9', 'fd00:1::/64');
    expect(list.includes('10.1.2.0')).toBe(true);
    expect(list.includes('10.1.2.255')).toBe(true);
    expect(list.includes('10.1.3.1')).toBe(false);
    expect(list.includes('192.168.7.9')).toBe(true);
    expect(list.includes('192.168.7.10')).toBe(false);
    expect(list.includes('fd00:1::abcd')).toBe(true);
    expect(list.includes('fd00:2::1')).toBe(false);
  });

  test('matches an IPv4-mapped IPv6 address (a dual-stack socket) against IPv4 ranges, and the reverse', () => {
    expect(listOf('10.1.2.0/24').includes('::ffff:10.1.2.3')).toBe(true);
    expect(listOf('10.1.2.0/24').includes('::ffff:10.1.3.3')).toBe(false);
    expect(listOf('::ffff:10.1.2.0/120').includes('10.1.2.3')).toBe(true);
  });

  test('a range of one address (/32, /128) admits that address alone', () => {
    const list = listOf('10.1.2.3/32', 'fd00::7/128');
    expect(list.includes('10.1.2.3')).toBe(true);
    expect(list.includes('10.1.2.4')).toBe(false);
    expect(list.includes('fd00::7')).toBe(true);
    expect(list.includes('fd00::8')).toBe(false);
  });

  test('admits no missing, malformed or zoned address', () => {
    const list = listOf('0.0.0.0/0', '::/0');
    expect(list.includes(undefined)).toBe(false);
    expect(list.includes('')).toBe(false);
    expect(list.includes('not-an-address')).toBe(false);
    expect(list.includes('1.2.3.4')).toBe(true);
    expect(list.includes('fe80::1')).toBe(true);
    // How Node reports a link-local peer: its address and the link it came on, which no entry can name.
    expect(list.includes('fe80::1%eth0')).toBe(false);
    expect(listOf('fe80::1').includes('fe80::1%eth0')).toBe(false);
  });
});

const MONITOR_KEY = 'monitor-key-Zx81q-7Hc2Lw9vTq4Rb';
const PUMP_KEY = 'pump-key-Qw72p-K8sN3mXc5Vd1Jf';
const base: DeviceAuthInput = {
  valid_keys: { 'monitor-1': 'env:MONITOR_KEY', 'pump-1': 'env:PUMP_KEY', 'scale-1': 'env:PUMP_KEY' },
  jwt_secret: 'env:SECRET',
  project_id: 'project-1',
};
const sources = { environment: { MONITOR_KEY, PUMP_KEY, SECRET: 's'.repeat(40) }, readFile: (): string => '' };

function resolve(overrides: Partial<DeviceAuthInput>) {
  return resolveDeviceAuth(deviceAuthSchema.parse({ ...base, ...overrides }), sources).config.networks;
}

function refusal(overrides: Partial<DeviceAuthInput>): string {
  try {
    resolve(overrides);
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  throw new Error('expected the configuration to be refused');
}

describe('device_auth networks', () => {
  test('without any list, every device may come from anywhere', () => {
    const networks = resolve({});
    expect(networks.restricted).toBe(false);
    expect(networks.allows('monitor-1', '203.0.113.9')).toBe(true);
  });

  test('a list for all devices, or for one device only, restricts the networks', () => {
    expect(resolve({ allowed_networks: ['10.0.0.0/8'] }).restricted).toBe(true);
    expect(resolve({ allowed_networks_per_device: { 'monitor-1': ['10.20.3.0/24'] } }).restricted).toBe(true);
  });

  test("a device's own list applies instead of the list for all devices; the others keep that one", () => {
    const networks = resolve({ allowed_networks: ['10.0.0.0/8'], allowed_networks_per_device: { 'monitor-1': ['10.20.3.0/24'], 'pump-1': ['198.51.100.7'] } });
    expect(networks.allows('monitor-1', '10.20.3.14')).toBe(true);
    expect(networks.allows('monitor-1', '10.20.4.14')).toBe(false);
    expect(networks.allows('pump-1', '198.51.100.7')).toBe(true);
    expect(networks.allows('pump-1', '10.20.3.14')).toBe(false);
    expect(networks.allows('scale-1', '10.99.0.1')).toBe(true);
    expect(networks.allows('scale-1', '198.51.100.7')).toBe(false);
    expect(networks.allows('scale-1', undefined)).toBe(false);
  });

  test('a malformed entry is refused at start, naming the device and the entry, with the other problems on one line', () => {
    const message = refusal({ allowed_networks: ['10.0.0.0/8', '10.0.0.0/40'], allowed_networks_per_device: { 'monitor-1': ['10.20.3.0/24', 'ward-3'] } });
    expect(message).toContain('device_auth.allowed_networks[1]: "10.0.0.0/40" of all devices is not an IPv4 or IPv6 address or CIDR range');
    expect(message).toContain('device_auth.allowed_networks_per_device.monitor-1[1]: "ward-3" of device monitor-1 is not an IPv4 or IPv6 address or CIDR range');
    expect(message).not.toContain('\n');
  });

  test('a list for a device without a key is refused: a misspelt id would leave the device it meant unrestricted', () => {
    expect(refusal({ allowed_networks_per_device: { 'monitor-l': ['10.20.3.0/24'] } })).toContain(
      'device_auth.allowed_networks_per_device.monitor-l: device monitor-l has no key in device_auth.valid_keys',
    );
  });

  test('an empty list is refused by the schema rather than read as "anywhere" or "nowhere"', () => {
    expect(deviceAuthSchema.safeParse({ ...base, allowed_networks: [] }).success).toBe(false);
    expect(deviceAuthSchema.safeParse({ ...base, allowed_networks_per_device: { 'monitor-1': [] } }).success).toBe(false);
  });
});
