/**
 * Password hashes for the standalone host's users, kept in `User.passwordHash` as Medplum keeps its own (Medplum
 * uses bcrypt; this host uses Node's scrypt, so it needs no native module). The hash says how it was made
 * (`scrypt$N$r$p$salt$hash`), so its cost can change without invalidating stored ones.
 */
import { randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';

const COST = { N: 16_384, r: 8, p: 1 } as const;
const KEY_BYTES = 32;

function scrypt(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCallback(password, salt, KEY_BYTES, { ...options, maxmem: 64 * 1024 * 1024 }, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** A new hash of `password` with a random salt. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, COST);
  return ['scrypt', COST.N, COST.r, COST.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

// Checked against when there is no user, so an unknown email costs as much time as a wrong password.
const NO_USER_HASH = `scrypt$${COST.N}$${COST.r}$${COST.p}$${Buffer.alloc(16).toString('base64url')}$${Buffer.alloc(KEY_BYTES).toString('base64url')}`;

/** Whether `password` matches `hash`; a missing or unreadable hash never matches (after the same work). */
export async function verifyPassword(password: string, hash: string | undefined): Promise<boolean> {
  const parts = (hash ?? NO_USER_HASH).split('$');
  const [scheme, n, r, p, salt, key] = parts.length === 6 ? parts : NO_USER_HASH.split('$');
  const expected = Buffer.from(key, 'base64url');
  const derived = await scrypt(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) });
  return hash !== undefined && scheme === 'scrypt' && derived.length === expected.length && timingSafeEqual(derived, expected);
}
