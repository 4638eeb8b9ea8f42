/**
 * The minimum strength of a device API key: at least 128 bits, counted as a length rule over the key's alphabet
 * (the smallest of the usual alphabets that holds every character of the key): each character carries log2 of
 * the alphabet's size. Keys hold visible ASCII characters only. Keys that `fhirgate provision` and the standalone
 * host generate (random bytes in base64url) pass with room to spare. The rule cannot tell a random key from a
 * long predictable one; it refuses the keys that are too short to be strong whatever their origin.
 */

/** Bits a device key must hold. */
export const MIN_DEVICE_KEY_BITS = 128;

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

/** The rule, for messages and docs: each alphabet and the length it needs. */
export const DEVICE_KEY_RULE = `at least ${MIN_DEVICE_KEY_BITS} bits, that is at least ${ALPHABETS.map((alphabet) => `${minimumLength(alphabet)} ${alphabet.name}`).join(', ')}`;

/** Why `key` is refused ("too weak: ...", "not allowed: ..."), or undefined when it is strong enough. Never repeats the key. */
export function describeWeakKey(key: string): string | undefined {
  const alphabet = ALPHABETS.find((candidate) => candidate.pattern.test(key));
  if (!alphabet) {
    return 'not allowed: a device key may hold visible ASCII characters only (no spaces, no control or non-ASCII characters)';
  }
  if (key.length < minimumLength(alphabet)) {
    return `too weak: a device key needs ${DEVICE_KEY_RULE} (\`fhirgate provision\` generates such keys, and so does \`openssl rand -base64 32\`)`;
  }
  return undefined;
}
