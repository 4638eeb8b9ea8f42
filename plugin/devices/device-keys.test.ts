import { describe, expect, test } from '@jest/globals';
import { createDeviceKeyCheck } from './device-keys.ts';

const MONITOR_KEY = 'Monitor-Key-7f3a9c';
const PUMP_KEY = 'Pump-Key-21b8e4';

const checkKey = createDeviceKeyCheck(
  new Map([
    ['monitor-1', [MONITOR_KEY]],
    ['pump-2', [PUMP_KEY]],
  ]),
);

describe('createDeviceKeyCheck', () => {
  test('accepts the configured key of a device', () => {
    expect(checkKey('monitor-1', MONITOR_KEY)).toBe(true);
    expect(checkKey('pump-2', PUMP_KEY)).toBe(true);
  });

  test('compares keys case-sensitively', () => {
    expect(checkKey('monitor-1', MONITOR_KEY.toLowerCase())).toBe(false);
    expect(checkKey('monitor-1', MONITOR_KEY.toUpperCase())).toBe(false);
  });

  test.each([
    ['one character short', MONITOR_KEY.slice(0, -1)],
    ['a prefix', MONITOR_KEY.slice(0, 4)],
    ['one character longer', `${MONITOR_KEY}x`],
    ['padded with whitespace', ` ${MONITOR_KEY} `],
    ['empty', ''],
    ['10 KB long', MONITOR_KEY.repeat(600).slice(0, 10_240)],
  ])('refuses a key that is %s, without throwing', (_description, key) => {
    expect(() => checkKey('monitor-1', key)).not.toThrow();
    expect(checkKey('monitor-1', key)).toBe(false);
  });

  test('refuses an unknown device, even with a key that is valid for another device', () => {
    expect(checkKey('unknown-device', MONITOR_KEY)).toBe(false);
    expect(checkKey('', MONITOR_KEY)).toBe(false);
    expect(checkKey('__proto__', MONITOR_KEY)).toBe(false);
  });

  test("a key of one device does not open another device's account", () => {
    expect(checkKey('pump-2', MONITOR_KEY)).toBe(false);
    expect(checkKey('monitor-1', PUMP_KEY)).toBe(false);
  });

  test('accepts both keys of a device while its key is being rotated, and no others', () => {
    const rotating = createDeviceKeyCheck(new Map([['monitor-1', ['old-key-aaaa', 'new-key-bbbb']]]));
    expect(rotating('monitor-1', 'old-key-aaaa')).toBe(true);
    expect(rotating('monitor-1', 'new-key-bbbb')).toBe(true);
    expect(rotating('monitor-1', 'old-key-aaaanew-key-bbbb')).toBe(false);
    expect(rotating('monitor-1', 'other-key-cccc')).toBe(false);
  });

  test('a device with no keys left accepts nothing', () => {
    const retired = createDeviceKeyCheck(new Map([['monitor-1', []]]));
    expect(retired('monitor-1', '')).toBe(false);
    expect(retired('monitor-1', MONITOR_KEY)).toBe(false);
  });

  test('accepts unicode keys exactly, telling apart look-alike and differently normalised forms', () => {
    const composed = 'clé-ключ-鍵-🔑'; // é as one code point
    const decomposed = composed.normalize('NFD'); // é as e + combining accent
    const unicodeCheck = createDeviceKeyCheck(new Map([['monitor-1', [composed]]]));
    expect(unicodeCheck('monitor-1', composed)).toBe(true);
    expect(unicodeCheck('monitor-1', decomposed)).toBe(false);
    expect(unicodeCheck('monitor-1', 'cle-ключ-鍵-🔑')).toBe(false);
    expect(unicodeCheck('monitor-1', 'clé-ключ-鍵-🗝')).toBe(false);
  });
});
