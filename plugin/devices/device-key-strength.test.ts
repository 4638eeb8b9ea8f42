import { describe, expect, test } from '@jest/globals';
import { describeWeakKey } from './device-key-strength.ts';

// The refusals an operator reads at start-up, word for word as docs/devices.md shows them.
const TOO_SHORT =
  'too weak: a device key needs at least 128 bits, that is at least 39 decimal digits, 32 hex digits, 25 letters of one case and digits, 22 base64 or base64url characters, 20 characters of any other visible ASCII (`fhirgate provision` generates such keys, and so does `openssl rand -base64 32`)';
const TOO_UNIFORM =
  'too weak: its characters repeat too much: a device key needs at least 8 different characters (5 for a key of decimal digits alone), whatever its length (`fhirgate provision` generates such keys, and so does `openssl rand -base64 32`)';

describe('the refusal of a weak device key', () => {
  test('a key too short names every alphabet with the length it needs, and how to generate a strong key', () => {
    expect(describeWeakKey('secret')).toBe(TOO_SHORT);
  });

  test('a key too uniform names the variety rule, and how to generate a strong key', () => {
    expect(describeWeakKey('0'.repeat(41))).toBe(TOO_UNIFORM);
  });
});

describe('an upper-case key is measured like its lower-case twin', () => {
  // `openssl rand -hex` writes lower case, other tools (and a GUID without its dashes) upper case: each case of an
  // alphabet asks the same length, not the shorter one of the next larger alphabet.
  test.each([
    ['hex digits', '0123456789ABCDEF', 32],
    ['letters of one case and digits', '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ', 25],
  ])('upper-case %s: one character short of the length is refused, the length accepted', (_name, alphabet, length) => {
    const key = Array.from({ length }, (_, index) => alphabet[(index * 7) % alphabet.length]).join('');
    expect(describeWeakKey(key)).toBeUndefined();
    expect(describeWeakKey(key.slice(1))).toBe(TOO_SHORT);
    expect(describeWeakKey(key.toLowerCase().slice(1))).toBe(TOO_SHORT);
  });
});
