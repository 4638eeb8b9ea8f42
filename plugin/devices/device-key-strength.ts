/**
 * The minimum strength of a device API key, in two rules, both checked at start-up:
 *   1. length: at least 128 bits, counted over the key's alphabet (the smallest of the usual alphabets that holds
 *      every character of the key): each character carries log2 of the alphabet's size;
 *   2. variety: at least 8 different characters (5 for a key of decimal digits alone), so that a key of one
 *      character repeated (41 zeros), or of a few repeated, is not taken for 128 bits by rule 1.
 * Keys hold visible ASCII characters only. Keys that `fhirgate provision` and the standalone host generate (random
 * bytes in base64url), and `openssl rand -hex 16` / `-base64 32`, pass both with room to spare: a random key of the
 * shortest length rule 1 allows falls below rule 2's count with a probability under 1 in 10^7 (hex, 32 digits; the
 * other alphabets far less). The rules cannot tell a random key from a long predictable one; they refuse the keys
 * that are too short or too uniform to be strong whatever their origin.
 */

/** Bits a device key must hold. */
export const MIN_DEVICE_KEY_BITS = 128;

/** Different characters a device key must hold, whatever its alphabet; an alphabet of fewer than twice as many asks half of its size. */
export const MIN_DISTINCT_KEY_CHARACTERS = 8;

interface KeyAlphabet {
  readonly name: string;
  readonly size: number;
  readonly pattern: RegExp;
}

// Smallest first: a key is measured against the first alphabet that holds all of it.
const ALPHABETS: readonly KeyAlphabet[] = [
  { name: 'decimal digits', size: 10, pattern: /^[0-9]+$/ },
  { name: 'hex digits', size: 16, pattern: /^(?:[0-9a-f]+|[0-9A-F]+)$/ },
  { name: 'letters of one case and digits', size: 36, pattern: /^(?:[0-9a-z]+|[0-9A-Z]+)$/ },
  { name: 'base64 or base64url characters', size: 64, pattern: /^[0-9A-Za-z_+/=-]+$/ },
  { name: 'characters of any other visible ASCII', size: 94, pattern: /^[\x21-\x7e]+$/ },
];

/** The least number of characters a key of `alphabet` needs. */
function minimumLength(alphabet: KeyAlphabet): number {
  return Math.ceil(MIN_DEVICE_KEY_BITS / Math.log2(alphabet.size));
}

/** The least number of different characters a key of `alphabet` needs: 8, or half a smaller alphabet (5 decimal digits). */
function minimumDistinct(alphabet: KeyAlphabet): number {
  return Math.min(MIN_DISTINCT_KEY_CHARACTERS, Math.floor(alphabet.size / 2));
}

/** The length rule, for messages and docs: each alphabet and the length it needs. */
export const DEVICE_KEY_RULE = `at least ${MIN_DEVICE_KEY_BITS} bits, that is at least ${ALPHABETS.map((alphabet) => `${minimumLength(alphabet)} ${alphabet.name}`).join(', ')}`;

/** The variety rule, for messages and docs. */
export const DEVICE_KEY_VARIETY_RULE = `at least ${MIN_DISTINCT_KEY_CHARACTERS} different characters (${minimumDistinct(ALPHABETS[0])} for a key of decimal digits alone)`;

const GENERATORS = '`fhirgate provision` generates such keys, and so does `openssl rand -base64 32`';

/** Why `key` is refused ("too weak: ...", "not allowed: ..."), or undefined when it is strong enough. Never repeats the key. */
export function describeWeakKey(key: string): string | undefined {
  const alphabet = ALPHABETS.find((candidate) => candidate.pattern.test(key));
  if (!alphabet) {
    return 'not allowed: a device key may hold visible ASCII characters only (no spaces, no control or non-ASCII characters)';
  }
  if (key.length < minimumLength(alphabet)) {
    return `too weak: a device key needs ${DEVICE_KEY_RULE} (${GENERATORS})`;
  }
  if (new Set(key).size < minimumDistinct(alphabet)) {
    return `too weak: its characters repeat too much: a device key needs ${DEVICE_KEY_VARIETY_RULE}, whatever its length (${GENERATORS})`;
  }
  return undefined;
}
