import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes, randomInt } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deviceAuthSchema, resolveDeviceAuth } from './device-auth-config.ts';
import type { DeviceAuthConfig, DeviceAuthInput, SecretSources } from './device-auth-config.ts';

const SIGNING_SECRET = 'signing-secret-0123456789abcdefghij'; // 35 bytes
const OLD_SIGNING_SECRET = 'old-signing-secret-0123456789abcdefgh';
const MONITOR_KEY = 'monitor-key-Zx81q-7Hc2Lw9vTq4Rb';
const PUMP_KEY = 'pump-key-Qw72p-K8sN3mXc5Vd1Jf';
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const VISIBLE_ASCII = Array.from({ length: 94 }, (_, index) => String.fromCharCode(0x21 + index)).join('');

/**
 * `length` characters drawn at random from `alphabet`, as a key generator would; drawn again when all of them fall
 * within `smaller` (a smaller alphabet, whose keys the length rule measures by its own, longer, minimum).
 */
function randomKey(alphabet: string, length: number, smaller?: RegExp): string {
  for (;;) {
    const key = Array.from({ length }, () => alphabet[randomInt(alphabet.length)]).join('');
    if (!smaller?.test(key)) return key;
  }
}
const BASE64_ONLY = /^[0-9A-Za-z_+/=-]+$/;
const ONE_CASE_ONLY = /^(?:[0-9a-z]+|[0-9A-Z]+)$/;
const HEX_ONLY = /^[0-9a-f]+$/;

/** The smallest `device_auth` an operator can write, with every secret taken from the environment. */
const minimal: DeviceAuthInput = {
  valid_keys: { 'monitor-1': 'env:MONITOR_KEY' },
  jwt_secret: 'env:DEVICE_JWT_SECRET',
  identifier_system: 'urn:example:device-id',
  project_id: 'project-1',
};

const environment = { MONITOR_KEY, PUMP_KEY, DEVICE_JWT_SECRET: SIGNING_SECRET, OLD_DEVICE_JWT_SECRET: OLD_SIGNING_SECRET };

function sourcesWith(variables: Record<string, string | undefined>): SecretSources {
  return { environment: variables, readFile: (path) => readFileSync(path, 'utf8') };
}

function resolveWith(overrides: Partial<DeviceAuthInput>, variables: Record<string, string | undefined> = environment) {
  return resolveDeviceAuth(deviceAuthSchema.parse({ ...minimal, ...overrides }), sourcesWith(variables));
}

function resolveConfig(overrides: Partial<DeviceAuthInput>, variables?: Record<string, string | undefined>): DeviceAuthConfig {
  return resolveWith(overrides, variables).config;
}

function resolveErrorMessage(overrides: Partial<DeviceAuthInput>, variables: Record<string, string | undefined> = environment): string {
  try {
    resolveWith(overrides, variables);
  } catch (error) {
    if (error instanceof Error) {
      return error.message;
    }
    throw error;
  }
  throw new Error('expected the configuration to be refused');
}

function schemaErrorMessage(input: unknown): string {
  const result = deviceAuthSchema.safeParse(input);
  if (result.success) {
    throw new Error('expected the schema to refuse the configuration');
  }
  return result.error.message;
}

describe('deviceAuthSchema', () => {
  test('fills in the defaults: 5-minute tokens, 10 requests per second, failed-attempt limits, no auto-registration', () => {
    const options = deviceAuthSchema.parse(minimal);
    expect(options.token_expiry_minutes).toBe(5);
    expect(options.rate_limit_per_second).toBe(10);
    expect(options.failed_attempts_per_source).toBe(10);
    expect(options.failed_attempts_per_device).toBe(20);
    expect(options.failed_attempts_window_seconds).toBe(60);
    expect(options.lockout_seconds).toBe(300);
    expect(options.auto_register).toBe(false);
    expect(options.manufacturer).toBeUndefined();
  });

  test.each([5, 60, 1440])('accepts a token expiry of %i minutes', (minutes) => {
    expect(deviceAuthSchema.parse({ ...minimal, token_expiry_minutes: minutes }).token_expiry_minutes).toBe(minutes);
  });

  test.each([4, 1441, 0, -5, 7.5])('refuses a token expiry of %s minutes, naming the setting', (minutes) => {
    expect(schemaErrorMessage({ ...minimal, token_expiry_minutes: minutes })).toContain('token_expiry_minutes');
  });

  test.each([0, -1, 2.5])('refuses a rate limit of %s per second', (perSecond) => {
    expect(schemaErrorMessage({ ...minimal, rate_limit_per_second: perSecond })).toContain('rate_limit_per_second');
  });

  test.each([
    ['failed_attempts_per_source', 0],
    ['failed_attempts_per_device', 1.5],
    ['failed_attempts_window_seconds', 0],
    ['failed_attempts_window_seconds', 3601],
    ['lockout_seconds', 0],
  ])('refuses %s = %s, naming the setting', (field, value) => {
    expect(schemaErrorMessage({ ...minimal, [field]: value })).toContain(field);
  });

  test('refuses unknown fields, such as a misspelt setting', () => {
    expect(schemaErrorMessage({ ...minimal, token_expiry_minute: 60 })).toContain('token_expiry_minute');
    expect(schemaErrorMessage({ ...minimal, api_keys: { 'monitor-1': 'k' } })).toContain('api_keys');
  });

  test('requires the keys and the signing secret', () => {
    for (const field of ['valid_keys', 'jwt_secret'] as const) {
      const { [field]: _omitted, ...rest } = minimal;
      expect(schemaErrorMessage(rest)).toContain(field);
    }
  });

  test("takes the spec's three settings alone: devices named in urn:fhirgate:device, the project left to the host", () => {
    const options = deviceAuthSchema.parse({ valid_keys: { 'monitor-1': 'env:MONITOR_KEY' }, jwt_secret: 'env:DEVICE_JWT_SECRET', token_expiry_minutes: 60 });
    expect(options.identifier_system).toBe('urn:fhirgate:device');
    expect(options.project_id).toBeUndefined();
    expect(options.token_expiry_minutes).toBe(60);
  });

  test.each(['monitor-1', 'ward-3.monitor_7:a', 'A', 'x'.repeat(128)])('accepts the device id %s', (deviceId) => {
    expect(deviceAuthSchema.safeParse({ ...minimal, valid_keys: { [deviceId]: 'env:MONITOR_KEY' } }).success).toBe(true);
  });

  test.each(['', 'bad id', '-leading-dash', '.hidden', 'ward/3', 'monitor#1', 'gerät-1', 'x'.repeat(129)])(
    'refuses the device id %j without echoing its key',
    (deviceId) => {
      const message = schemaErrorMessage({ ...minimal, valid_keys: { [deviceId]: MONITOR_KEY } });
      expect(message).toContain('valid_keys');
      expect(message).not.toContain(MONITOR_KEY);
    },
  );

  test('refuses an empty key, an empty key list and an empty signing secret', () => {
    expect(deviceAuthSchema.safeParse({ ...minimal, valid_keys: { 'monitor-1': '' } }).success).toBe(false);
    expect(deviceAuthSchema.safeParse({ ...minimal, valid_keys: { 'monitor-1': [] } }).success).toBe(false);
    expect(deviceAuthSchema.safeParse({ ...minimal, jwt_secret: '' }).success).toBe(false);
    expect(deviceAuthSchema.safeParse({ ...minimal, jwt_secret: [] }).success).toBe(false);
  });
});

describe('resolveDeviceAuth', () => {
  let directory: string;

  beforeAll(() => {
    directory = mkdtempSync(join(tmpdir(), 'fhirgate-device-auth-'));
  });

  afterAll(() => {
    rmSync(directory, { recursive: true, force: true });
  });

  function writeSecretFile(name: string, content: string): string {
    const path = join(directory, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  }

  test('resolves env: references and carries the other settings over', () => {
    const { config, warnings } = resolveWith({ token_expiry_minutes: 60, auto_register: true, manufacturer: 'Acme' });
    expect(config).toEqual({
      validKeys: new Map([['monitor-1', [MONITOR_KEY]]]),
      jwtSecrets: [SIGNING_SECRET],
      tokenExpiryMinutes: 60,
      identifierSystem: 'urn:example:device-id',
      projectId: 'project-1',
      rateLimitPerSecond: 10,
      failedAttempts: { perSource: 10, perDevice: 20, windowSeconds: 60, lockoutSeconds: 300 },
      autoRegister: true,
      manufacturer: 'Acme',
      networks: expect.objectContaining({ restricted: false }),
    });
    expect(warnings).toEqual([]);
  });

  test('resolves file: references, ignoring the trailing newline a secret file usually has', () => {
    const keyFile = writeSecretFile('monitor-key', `${MONITOR_KEY}\n`);
    const secretFile = writeSecretFile('jwt-secret', `${SIGNING_SECRET}\n`);
    const { config, warnings } = resolveWith({ valid_keys: { 'monitor-1': `file:${keyFile}` }, jwt_secret: `file:${secretFile}` }, {});
    expect(config.validKeys.get('monitor-1')).toEqual([MONITOR_KEY]);
    expect(config.jwtSecrets).toEqual([SIGNING_SECRET]);
    expect(warnings).toEqual([]);
  });

  test('a missing environment variable is an error naming the setting and the variable, not any secret', () => {
    const message = resolveErrorMessage({ valid_keys: { 'monitor-1': 'env:MONITOR_KEY', 'pump-2': 'env:PUMP_2_KEY' } });
    expect(message).toContain('device_auth.valid_keys.pump-2');
    expect(message).toContain('PUMP_2_KEY');
    for (const secret of [MONITOR_KEY, PUMP_KEY, SIGNING_SECRET]) {
      expect(message).not.toContain(secret);
    }
  });

  test('an environment variable holding only whitespace counts as missing', () => {
    const message = resolveErrorMessage({}, { ...environment, MONITOR_KEY: '  \n' });
    expect(message).toContain('device_auth.valid_keys.monitor-1');
    expect(message).toContain('MONITOR_KEY');
  });

  test('an unreadable file is an error naming the setting and the file', () => {
    const missingPath = join(directory, 'no-such-secret');
    const message = resolveErrorMessage({ jwt_secret: `file:${missingPath}` });
    expect(message).toContain('device_auth.jwt_secret');
    expect(message).toContain(missingPath);
    expect(message).not.toContain(MONITOR_KEY);
  });

  test('a directory given as a secret file is an error naming the setting and the path', () => {
    const message = resolveErrorMessage({ valid_keys: { 'monitor-1': `file:${directory}` } });
    expect(message).toContain('device_auth.valid_keys.monitor-1');
    expect(message).toContain(directory);
  });

  test('an empty file is an error naming the setting and the file, not any secret', () => {
    const emptyFile = writeSecretFile('empty-key', '\n');
    const message = resolveErrorMessage({ valid_keys: { 'monitor-1': `file:${emptyFile}`, 'pump-2': 'env:PUMP_KEY' } });
    expect(message).toContain('device_auth.valid_keys.monitor-1');
    expect(message).toContain(emptyFile);
    expect(message).not.toContain(PUMP_KEY);
    expect(message).not.toContain(SIGNING_SECRET);
  });

  test('every problem is reported at once, so an operator fixes them in one go', () => {
    const message = resolveErrorMessage({ valid_keys: { 'monitor-1': 'env:UNSET_KEY' }, jwt_secret: 'env:UNSET_SECRET' }, {});
    expect(message).toContain('UNSET_KEY');
    expect(message).toContain('UNSET_SECRET');
  });

  test('a configuration that names no project is refused, naming device_auth.project_id (a Medplum server holds several)', () => {
    expect(resolveErrorMessage({ project_id: undefined })).toContain('device_auth.project_id');
  });

  test('a literal key works but gives a warning naming the setting and not the key', () => {
    const { config, warnings } = resolveWith({ valid_keys: { 'monitor-1': MONITOR_KEY } });
    expect(config.validKeys.get('monitor-1')).toEqual([MONITOR_KEY]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('device_auth.valid_keys.monitor-1');
    expect(warnings[0]).not.toContain(MONITOR_KEY);
  });

  test('a literal signing secret works but gives a warning naming the setting and not the secret', () => {
    const { config, warnings } = resolveWith({ jwt_secret: SIGNING_SECRET });
    expect(config.jwtSecrets).toEqual([SIGNING_SECRET]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('device_auth.jwt_secret');
    expect(warnings[0]).not.toContain(SIGNING_SECRET);
  });

  test('a literal signing secret shorter than 32 bytes is refused without echoing it', () => {
    const shortSecret = 'x'.repeat(31);
    const message = resolveErrorMessage({ jwt_secret: shortSecret });
    expect(message).toContain('device_auth.jwt_secret');
    expect(message).toContain('32 bytes');
    expect(message).not.toContain(shortSecret);
  });

  test('a signing secret shorter than 32 bytes from the environment is refused without echoing it', () => {
    const shortSecret = 'short-secret-from-env-Kp3';
    const message = resolveErrorMessage({}, { ...environment, DEVICE_JWT_SECRET: shortSecret });
    expect(message).toContain('device_auth.jwt_secret');
    expect(message).toContain('32 bytes');
    expect(message).not.toContain(shortSecret);
  });

  test('a signing secret of exactly 32 bytes is accepted', () => {
    const secret = 's'.repeat(32);
    expect(resolveConfig({}, { ...environment, DEVICE_JWT_SECRET: secret }).jwtSecrets).toEqual([secret]);
  });

  test('the 32-byte minimum counts UTF-8 bytes, not characters', () => {
    const sixteenTwoByteCharacters = 'é'.repeat(16); // 16 characters, 32 bytes
    expect(resolveConfig({}, { ...environment, DEVICE_JWT_SECRET: sixteenTwoByteCharacters }).jwtSecrets).toEqual([sixteenTwoByteCharacters]);

    const eightFourByteCharacters = '🔑'.repeat(8); // 16 UTF-16 units, 32 bytes
    expect(resolveConfig({}, { ...environment, DEVICE_JWT_SECRET: eightFourByteCharacters }).jwtSecrets).toEqual([eightFourByteCharacters]);

    const thirtyOneBytes = `${'é'.repeat(15)}a`; // 16 characters, 31 bytes
    expect(resolveErrorMessage({}, { ...environment, DEVICE_JWT_SECRET: thirtyOneBytes })).toContain('32 bytes');
  });

  test('a device may have several keys at once while its key is rotated, each named by position', () => {
    const config = resolveConfig({ valid_keys: { 'monitor-1': ['env:MONITOR_KEY', 'env:PUMP_KEY'] } });
    expect(config.validKeys.get('monitor-1')).toEqual([MONITOR_KEY, PUMP_KEY]);

    const message = resolveErrorMessage({ valid_keys: { 'monitor-1': ['env:MONITOR_KEY', 'env:NEXT_MONITOR_KEY'] } });
    expect(message).toContain('device_auth.valid_keys.monitor-1[1]');
    expect(message).toContain('NEXT_MONITOR_KEY');
    expect(message).not.toContain(MONITOR_KEY);
  });

  test('several signing secrets keep their order (the first signs), and a short one is named by position', () => {
    const config = resolveConfig({ jwt_secret: ['env:DEVICE_JWT_SECRET', 'env:OLD_DEVICE_JWT_SECRET'] });
    expect(config.jwtSecrets).toEqual([SIGNING_SECRET, OLD_SIGNING_SECRET]);

    const message = resolveErrorMessage(
      { jwt_secret: ['env:DEVICE_JWT_SECRET', 'env:OLD_DEVICE_JWT_SECRET'] },
      { ...environment, OLD_DEVICE_JWT_SECRET: 'too-short-old-secret' },
    );
    expect(message).toContain('device_auth.jwt_secret[1]');
    expect(message).not.toContain('device_auth.jwt_secret[0]');
    expect(message).not.toContain('too-short-old-secret');
    expect(message).not.toContain(SIGNING_SECRET);
  });
});

describe('device key strength', () => {
  /** The one error line a configuration with `key` for monitor-1 is refused with. */
  function refusalOf(key: string): string {
    return resolveErrorMessage({ valid_keys: { 'monitor-1': 'env:CANDIDATE_KEY' } }, { ...environment, CANDIDATE_KEY: key });
  }

  test.each([
    ['the key `fhirgate provision` generates (32 random bytes, base64url)', randomBytes(32).toString('base64url')],
    ["the standalone host's demo key (24 random bytes, base64url)", randomBytes(24).toString('base64url')],
    ['`openssl rand -base64 32`', randomBytes(32).toString('base64')],
    ['32 hex digits (`openssl rand -hex 16`)', randomBytes(16).toString('hex')],
    ['64 hex digits (`openssl rand -hex 32`)', randomBytes(32).toString('hex')],
    ['39 random decimal digits', randomKey('0123456789', 39)],
    ['25 random lower-case letters and digits', randomKey('abcdefghijklmnopqrstuvwxyz0123456789', 25, HEX_ONLY)],
    ['22 random base64url characters', randomKey(BASE64URL, 22, ONE_CASE_ONLY)],
    ['20 random visible ASCII characters with punctuation', randomKey(VISIBLE_ASCII, 20, BASE64_ONLY)],
    ['39 decimal digits, each of 5 different ones', '0123456789'.slice(0, 5).repeat(8)],
    ['32 hex digits, 8 different ones', 'a3f9b2c1'.repeat(4)],
  ])('accepts %s', (_name, key) => {
    expect(resolveConfig({ valid_keys: { 'monitor-1': 'env:CANDIDATE_KEY' } }, { ...environment, CANDIDATE_KEY: key }).validKeys.get('monitor-1')).toEqual([key]);
  });

  test.each([
    ['31 hex digits', randomBytes(16).toString('hex').slice(1)],
    ['38 decimal digits', '7'.repeat(38)],
    ['24 lower-case letters and digits', 'k3'.repeat(12)],
    ['21 base64url characters', 'Ab3-_'.repeat(4) + 'Z'],
    ['19 visible ASCII characters with punctuation', '!Ab3#'.repeat(4).slice(1)],
    ['a short word', 'secret'],
  ])('refuses %s on one line naming the device and the rule, never the key', (_name, key) => {
    const message = refusalOf(key);
    expect(message).toContain('device_auth.valid_keys.monitor-1: the key of device monitor-1 is too weak');
    expect(message).toContain('at least 128 bits');
    expect(message).toContain('32 hex digits');
    expect(message).toContain('22 base64 or base64url characters');
    expect(message).not.toContain('\n');
    expect(message).not.toContain(key);
  });

  test.each([
    ['spaces', 'correct horse battery staple and more words'],
    ['non-ASCII characters', 'ключ-устройства-номер-один-и-два'],
    ['a control character', `${randomBytes(32).toString('base64url')}\u0007`],
  ])('refuses a key with %s, naming the device and the rule', (_name, key) => {
    expect(refusalOf(key)).toContain('device_auth.valid_keys.monitor-1: the key of device monitor-1 is not allowed: a device key may hold visible ASCII characters only');
  });

  test.each([
    ['41 zeros', '0'.repeat(41)],
    ['64 zeros', '0'.repeat(64)],
    ['39 decimal digits of 4 different ones', '1234'.repeat(10)],
    ['one letter repeated 43 times', 'a'.repeat(43)],
    ['two characters alternating (44 of them)', 'ab'.repeat(22)],
    ['32 hex digits of 7 different ones', 'abc1234'.repeat(5).slice(0, 32)],
    ['a base64url key of 7 different characters', 'Ab3-_Zz'.repeat(5)],
    ['20 visible ASCII characters of 5 different ones', '!Ab3#'.repeat(4)],
  ])('refuses %s (too few different characters) on one line naming the device and the rule, never the key', (_name, key) => {
    const message = refusalOf(key);
    expect(message).toContain('device_auth.valid_keys.monitor-1: the key of device monitor-1 is too weak: its characters repeat too much');
    expect(message).toContain('at least 8 different characters (5 for a key of decimal digits alone)');
    expect(message).not.toContain('\n');
    expect(message).not.toContain(key);
  });

  test('random keys of the shortest length of each alphabet hold enough different characters', () => {
    const shortest: [string, number, RegExp | undefined][] = [
      ['0123456789', 39, undefined],
      ['0123456789abcdef', 32, /^[0-9]+$/],
      ['abcdefghijklmnopqrstuvwxyz0123456789', 25, HEX_ONLY],
      [BASE64URL, 22, ONE_CASE_ONLY],
      [VISIBLE_ASCII, 20, BASE64_ONLY],
    ];
    for (const [alphabet, length, smaller] of shortest) {
      for (let round = 0; round < 500; round++) {
        const key = randomKey(alphabet, length, smaller);
        expect(resolveConfig({ valid_keys: { 'monitor-1': 'env:CANDIDATE_KEY' } }, { ...environment, CANDIDATE_KEY: key }).validKeys.get('monitor-1')).toEqual([key]);
      }
    }
  });

  test('a weak key in a rotation list is named by its position; the strong one beside it is not', () => {
    const message = resolveErrorMessage({ valid_keys: { 'monitor-1': ['env:MONITOR_KEY', 'env:WEAK_KEY'] } }, { ...environment, WEAK_KEY: 'old-key-2222' });
    expect(message).toContain('device_auth.valid_keys.monitor-1[1]: the key of device monitor-1 is too weak');
    expect(message).not.toContain('monitor-1[0]');
  });
});
