/**
 * Device tokens: HS256 JWTs with the spec's claims (`sub` = device id, `entity_id` = the Device resource id,
 * `exp`, `is_device: true`) plus `iat`, `jti`, the audience `urn:fhirgate:device` and the header type
 * `device+jwt` (RFC 8725 explicit typing). A user's Medplum token (ES384 from Medplum 5.1, RS256 before; no such
 * audience or type) never verifies here, and the host refuses a device token as a user token (it is HS256 and
 * carries `is_device`).
 */
import { randomUUID } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { LRUCache } from 'lru-cache';
import { createTokenCache } from '../http/token-cache.ts';

/** The `aud` claim of every device token. */
export const DEVICE_TOKEN_AUDIENCE = 'urn:fhirgate:device';

/** The `typ` header of every device token. */
export const DEVICE_TOKEN_TYPE = 'device+jwt';

/** A verified device token. */
export interface DeviceTokenClaims {
  /** The device id (`sub`). */
  readonly deviceId: string;
  /** Id of the device's FHIR `Device` (`entity_id`). */
  readonly deviceResourceId: string;
  readonly tokenId: string;
  /** Unix seconds. */
  readonly expiresAt: number;
}

/** Issues and verifies device tokens. */
export interface DeviceTokenService {
  issue(device: { deviceId: string; deviceResourceId: string }): Promise<{ access: string; expiresIn: number; tokenId: string }>;
  /** The token's claims, or undefined for anything but a valid, unexpired device token of this service. */
  verify(token: string): Promise<DeviceTokenClaims | undefined>;
}

/**
 * How long a verified token's claims are remembered: a device sends the same token with every request until it
 * expires, and the claims of a token never change, so its signature is checked once (what can end a token
 * sooner, its Device, is read on every request by the routes).
 */
const VERIFIED_TTL_MS = 60_000;

/** A service signing with the first secret and accepting any of them (so the secret can be rotated). */
export function createDeviceTokenService(secrets: readonly string[], expiryMinutes: number): DeviceTokenService {
  const keys = secrets.map((secret) => new TextEncoder().encode(secret));
  const expiresIn = expiryMinutes * 60;
  const verified = createTokenCache<DeviceTokenClaims>({ ttlMs: VERIFIED_TTL_MS });
  return {
    issue: async ({ deviceId, deviceResourceId }) => {
      const issuedAt = Math.floor(Date.now() / 1000);
      const tokenId = randomUUID();
      const access = await new SignJWT({ entity_id: deviceResourceId, is_device: true })
        .setProtectedHeader({ alg: 'HS256', typ: DEVICE_TOKEN_TYPE })
        .setSubject(deviceId)
        .setAudience(DEVICE_TOKEN_AUDIENCE)
        .setIssuedAt(issuedAt)
        .setExpirationTime(issuedAt + expiresIn)
        .setJti(tokenId)
        .sign(keys[0]);
      return { access, expiresIn, tokenId };
    },
    verify: async (token) => {
      const known = verified.get(token);
      if (known) {
        return known;
      }
      const claims = await verifySignedToken(token, keys);
      if (claims) {
        // Stryker disable next-line all: equivalent, without it each request checks the signature again and finds the same claims (jose refuses the token from its exp, when the cache forgets it).
        verified.set(token, claims, claims.expiresAt);
      }
      return claims;
    },
  };
}

/** The claims of a token one of the keys signed, checked as the spec and RFC 8725 ask; undefined otherwise. */
async function verifySignedToken(token: string, keys: readonly Uint8Array[]): Promise<DeviceTokenClaims | undefined> {
  for (const key of keys) {
    try {
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['HS256'],
        audience: DEVICE_TOKEN_AUDIENCE,
        typ: DEVICE_TOKEN_TYPE,
        requiredClaims: ['sub', 'exp', 'iat', 'jti'],
      });
      if (payload.is_device !== true || typeof payload.entity_id !== 'string' || !payload.sub || !payload.jti || !payload.exp) {
        return undefined;
      }
      return { deviceId: payload.sub, deviceResourceId: payload.entity_id, tokenId: payload.jti, expiresAt: payload.exp };
    } catch {
      // Try the next secret; a token no secret verifies is refused below.
    }
  }
  return undefined;
}

const MEDIA_TYPE_PREFIX = 'application/';

/**
 * True when a bearer token claims to be a device token (header `typ`); says nothing about its validity. Every
 * bearer request asks (inside a Medplum server, every request to fhirgate's routes), and a server's tokens share a few
 * headers (one per signing key), so the answer is kept per header.
 */
export function looksLikeDeviceToken(token: string): boolean {
  const dot = token.indexOf('.');
  const header = dot === -1 ? token : token.slice(0, dot);
  let claims = typeClaims.get(header);
  if (claims === undefined) {
    claims = claimsDeviceType(header);
    typeClaims.set(header, claims);
  }
  return claims;
}

/** The token headers last asked about, and whether each claims the device type (bounded: headers are the caller's). */
const typeClaims = new LRUCache<string, boolean>({ max: 256 });

function claimsDeviceType(header: string): boolean {
  try {
    const parsed = JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as { typ?: unknown };
    // Compared as jose compares `typ` when it verifies: without case, and with an optional `application/`.
    if (typeof parsed.typ !== 'string') {
      return false;
    }
    const typ = parsed.typ.toLowerCase();
    return (typ.startsWith(MEDIA_TYPE_PREFIX) ? typ.slice(MEDIA_TYPE_PREFIX.length) : typ) === DEVICE_TOKEN_TYPE;
  } catch {
    return false;
  }
}
