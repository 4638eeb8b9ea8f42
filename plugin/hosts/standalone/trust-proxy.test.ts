import { describe, expect, test } from '@jest/globals';
import { readStandaloneConfig } from './standalone-config.ts';
import { parseTrustProxy } from './trust-proxy.ts';

describe('FHIRGATE_TRUST_PROXY', () => {
  test('unset: a proxy on the same machine, as before the setting existed', () => {
    expect(parseTrustProxy(undefined)).toEqual(['loopback']);
    expect(readStandaloneConfig({}).trustProxy).toEqual(['loopback']);
  });

  test('reads true, false, a hop count, and addresses, ranges and names separated by commas', () => {
    expect(parseTrustProxy('false')).toBe(false);
    expect(parseTrustProxy('true')).toBe(true);
    expect(parseTrustProxy('1')).toBe(1);
    expect(parseTrustProxy('10.0.0.5, 10.1.0.0/16 ,uniquelocal,fd00::/8')).toEqual(['10.0.0.5', '10.1.0.0/16', 'uniquelocal', 'fd00::/8']);
  });

  test('refuses start-up naming the variable and the entry that is not an address, a range or a name', () => {
    expect(() => readStandaloneConfig({ FHIRGATE_TRUST_PROXY: '10.0.0.5,my-proxy' })).toThrow(
      'Invalid configuration: FHIRGATE_TRUST_PROXY: "my-proxy" is not an address, a CIDR range, loopback, linklocal or uniquelocal',
    );
  });
});
