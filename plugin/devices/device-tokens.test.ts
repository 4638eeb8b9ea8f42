import { describe, expect, jest, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { SignJWT, decodeJwt, decodeProtectedHeader, generateKeyPair } from 'jose';
import type { JWTHeaderParameters } from 'jose';
import { DEVICE_TOKEN_AUDIENCE, DEVICE_TOKEN_TYPE, createDeviceTokenService, looksLikeDeviceToken } from './device-tokens.ts';

const SECRET = 'device-signing-secret-0123456789abcdef';
const OLD_SECRET = 'old-device-signing-secret-0123456789ab';
const NEW_SECRET = 'new-device-signing-secret-0123456789ab';
const OTHER_SECRET = 'someone-elses-signing-secret-0123456789';

const device = { deviceId: 'monitor-1', deviceResourceId: 'device-resource-1' };
const service = createDeviceTokenService([SECRET], 5);

function nowInSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

function encodeSegment(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

function decodeSegment(segment: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(segment, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** The claims of a valid device token, for crafting tokens that differ from it in one way. */
function validClaims(): Record<string, unknown> {
  const issuedAt = nowInSeconds();
  return {
    sub: device.deviceId,
    entity_id: device.deviceResourceId,
    is_device: true,
    aud: DEVICE_TOKEN_AUDIENCE,
    iat: issuedAt,
    exp: issuedAt + 300,
    jti: randomUUID(),
  };
}

interface CraftOptions {
  readonly claims?: Record<string, unknown>;
  readonly omit?: readonly string[];
  readonly header?: Partial<JWTHeaderParameters>;
  readonly secret?: string;
}

/** Signs a token with HS256 by hand: by default exactly what the service issues. */
async function craftToken({ claims = {}, omit = [], header = {}, secret = SECRET }: CraftOptions = {}): Promise<string> {
  const payload: Record<string, unknown> = { ...validClaims(), ...claims };
  for (const name of omit) {
    delete payload[name];
  }
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'HS256', typ: DEVICE_TOKEN_TYPE, ...header })
    .sign(new TextEncoder().encode(secret));
}

/** A token shaped like a Medplum user access token (ES384 from Medplum 5.1, RS256 before), signed with the server's own key pair. */
async function createMedplumUserToken(
  extraClaims: Record<string, unknown> = {},
  header: Partial<JWTHeaderParameters> = {},
  algorithm: 'ES384' | 'RS256' = 'ES384'
): Promise<string> {
  const { privateKey } = await generateKeyPair(algorithm);
  return new SignJWT({
    login_id: randomUUID(),
    username: randomUUID(),
    profile: 'Practitioner/8d4c5a3e-0f7e-4d1e-9a52-1f2f0c6f1b11',
    client_id: randomUUID(),
    scope: 'openid offline',
    ...extraClaims,
  })
    .setProtectedHeader({ alg: algorithm, typ: 'JWT', kid: 'medplum-key-1', ...header })
    .setSubject(randomUUID())
    .setIssuer('http://localhost:8103/')
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(privateKey);
}

describe('createDeviceTokenService: issuing', () => {
  test('issues a three-part JWT with the header {alg: HS256, typ: device+jwt}', async () => {
    const { access } = await service.issue(device);
    expect(access.split('.')).toHaveLength(3);
    expect(decodeProtectedHeader(access)).toEqual({ alg: 'HS256', typ: 'device+jwt' });
  });

  test("carries the spec's claims (sub, entity_id, exp, is_device) plus iat, jti and the device audience", async () => {
    const before = nowInSeconds();
    const { access, tokenId } = await service.issue(device);
    const claims = decodeJwt(access);
    expect(claims).toEqual({
      sub: 'monitor-1',
      entity_id: 'device-resource-1',
      is_device: true,
      aud: DEVICE_TOKEN_AUDIENCE,
      iat: expect.any(Number),
      exp: expect.any(Number),
      jti: tokenId,
    });
    expect(claims.iat).toBeGreaterThanOrEqual(before);
    expect(claims.iat).toBeLessThanOrEqual(nowInSeconds());
  });

  test.each([5, 60, 1440])('a %i-minute service sets exp = iat + minutes × 60 and expiresIn = minutes × 60', async (minutes) => {
    const { access, expiresIn } = await createDeviceTokenService([SECRET], minutes).issue(device);
    const claims = decodeJwt(access);
    expect(expiresIn).toBe(minutes * 60);
    expect(claims.exp).toBe((claims.iat ?? Number.NaN) + minutes * 60);
  });

  test('gives every token its own jti', async () => {
    const issued = await Promise.all([service.issue(device), service.issue(device), service.issue(device)]);
    const ids = issued.map(({ access }) => decodeJwt(access).jti);
    expect(new Set(ids).size).toBe(3);
    expect(ids).toEqual(issued.map(({ tokenId }) => tokenId));
  });
});

describe('createDeviceTokenService: verifying', () => {
  test('verifies its own token and returns the device, its Device resource, the token id and the expiry', async () => {
    const { access, tokenId } = await service.issue(device);
    expect(await service.verify(access)).toEqual({
      deviceId: 'monitor-1',
      deviceResourceId: 'device-resource-1',
      tokenId,
      expiresAt: decodeJwt(access).exp,
    });
  });

  test('a hand-crafted token with exactly the issued claims verifies (so the refusals below test one change each)', async () => {
    expect(await service.verify(await craftToken())).toMatchObject({ deviceId: 'monitor-1' });
  });

  test('refuses a token whose payload was changed to name another device', async () => {
    const { access } = await service.issue(device);
    const [header, payload, signature] = access.split('.');
    const forgedPayload = encodeSegment({ ...decodeSegment(payload), sub: 'pump-2' });
    expect(await service.verify([header, forgedPayload, signature].join('.'))).toBeUndefined();
  });

  test('refuses a token whose signature was altered', async () => {
    const { access } = await service.issue(device);
    const [header, payload, signature] = access.split('.');
    const alteredSignature = `${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`;
    expect(await service.verify([header, payload, alteredSignature].join('.'))).toBeUndefined();
  });

  test('refuses a token signed with another secret', async () => {
    expect(await service.verify(await craftToken({ secret: OTHER_SECRET }))).toBeUndefined();
    const { access } = await createDeviceTokenService([OTHER_SECRET], 5).issue(device);
    expect(await service.verify(access)).toBeUndefined();
  });

  test('a token verified before is still refused once it expires (its claims are kept until exp at most)', async () => {
    jest.useFakeTimers({ now: Date.now(), doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const shortLived = await craftToken({ claims: { iat: nowInSeconds(), exp: nowInSeconds() + 2 } });
      expect(await service.verify(shortLived)).toMatchObject({ deviceId: 'monitor-1' });
      expect(await service.verify(shortLived)).toMatchObject({ deviceId: 'monitor-1' });
      jest.setSystemTime(Date.now() + 2_000);
      expect(await service.verify(shortLived)).toBeUndefined();
    } finally {
      jest.useRealTimers();
    }
  });

  test('refuses an expired token', async () => {
    const expired = await craftToken({ claims: { iat: nowInSeconds() - 360, exp: nowInSeconds() - 60 } });
    expect(await service.verify(expired)).toBeUndefined();
  });

  test('refuses a token without is_device, or with is_device other than true', async () => {
    expect(await service.verify(await craftToken({ omit: ['is_device'] }))).toBeUndefined();
    expect(await service.verify(await craftToken({ claims: { is_device: false } }))).toBeUndefined();
    expect(await service.verify(await craftToken({ claims: { is_device: 'true' } }))).toBeUndefined();
  });

  test('refuses a token without a device (sub) or a Device resource (entity_id)', async () => {
    expect(await service.verify(await craftToken({ omit: ['sub'] }))).toBeUndefined();
    expect(await service.verify(await craftToken({ omit: ['entity_id'] }))).toBeUndefined();
    expect(await service.verify(await craftToken({ claims: { entity_id: 42 } }))).toBeUndefined();
  });

  test('refuses a token for another audience, or with none', async () => {
    expect(await service.verify(await craftToken({ claims: { aud: 'urn:someone-else' } }))).toBeUndefined();
    expect(await service.verify(await craftToken({ omit: ['aud'] }))).toBeUndefined();
  });

  test('refuses a token whose header type is not device+jwt, or is missing', async () => {
    expect(await service.verify(await craftToken({ header: { typ: 'JWT' } }))).toBeUndefined();
    expect(await service.verify(await craftToken({ header: { typ: 'at+jwt' } }))).toBeUndefined();
    expect(await service.verify(await craftToken({ header: { typ: undefined } }))).toBeUndefined();
  });

  test('refuses a token signed with the right secret but missing jti', async () => {
    expect(await service.verify(await craftToken({ omit: ['jti'] }))).toBeUndefined();
  });

  test('refuses a token signed with the right secret but missing iat (every token this service issues has one)', async () => {
    expect(await service.verify(await craftToken({ omit: ['iat'] }))).toBeUndefined();
  });

  test('refuses an unsigned token (alg: none), with or without a signature part', async () => {
    const header = encodeSegment({ alg: 'none', typ: DEVICE_TOKEN_TYPE });
    const payload = encodeSegment(validClaims());
    expect(await service.verify(`${header}.${payload}.`)).toBeUndefined();

    const { access } = await service.issue(device);
    const realSignature = access.split('.')[2];
    expect(await service.verify(`${header}.${access.split('.')[1]}.${realSignature}`)).toBeUndefined();
  });

  test('refuses a token with two or four parts', async () => {
    const { access } = await service.issue(device);
    const [header, payload, signature] = access.split('.');
    expect(await service.verify(`${header}.${payload}`)).toBeUndefined();
    expect(await service.verify(`${access}.${signature}`)).toBeUndefined();
  });

  test.each(['', 'garbage', 'a.b.c', '...', 'Bearer x.y.z', '\u0000\u0000.\u0000.\u0000'])('refuses the garbage %j without throwing', async (token) => {
    await expect(service.verify(token)).resolves.toBeUndefined();
  });

  test.each(['ES384', 'RS256'] as const)('refuses a Medplum user token (%s, login_id, profile)', async (algorithm) => {
    expect(await service.verify(await createMedplumUserToken({}, {}, algorithm))).toBeUndefined();
  });

  test.each(['ES384', 'RS256'] as const)('refuses an %s token from a foreign key pair even when it copies the device claims and header type', async (algorithm) => {
    const claims = validClaims();
    const impostor = await createMedplumUserToken(claims, { typ: DEVICE_TOKEN_TYPE }, algorithm);
    expect(await service.verify(impostor)).toBeUndefined();
  });
});

describe('createDeviceTokenService: rotating the signing secret', () => {
  test('a token signed with the old secret still verifies once the new secret is first in the list', async () => {
    const { access } = await createDeviceTokenService([OLD_SECRET], 5).issue(device);
    expect(await createDeviceTokenService([NEW_SECRET, OLD_SECRET], 5).verify(access)).toMatchObject({ deviceId: 'monitor-1' });
  });

  test('once the old secret is removed, its tokens are refused', async () => {
    const { access } = await createDeviceTokenService([OLD_SECRET], 5).issue(device);
    expect(await createDeviceTokenService([NEW_SECRET], 5).verify(access)).toBeUndefined();
  });

  test('new tokens are signed with the first secret of the list', async () => {
    const { access } = await createDeviceTokenService([NEW_SECRET, OLD_SECRET], 5).issue(device);
    expect(await createDeviceTokenService([NEW_SECRET], 5).verify(access)).toMatchObject({ deviceId: 'monitor-1' });
    expect(await createDeviceTokenService([OLD_SECRET], 5).verify(access)).toBeUndefined();
  });
});

describe('looksLikeDeviceToken', () => {
  test('is true for an issued device token', async () => {
    const { access } = await service.issue(device);
    expect(looksLikeDeviceToken(access)).toBe(true);
  });

  test('looks only at the header type, not at validity', async () => {
    expect(looksLikeDeviceToken(await craftToken({ secret: OTHER_SECRET }))).toBe(true);
    expect(looksLikeDeviceToken(`${encodeSegment({ typ: DEVICE_TOKEN_TYPE })}.x.y`)).toBe(true);
    // As jose compares `typ`: without case, with or without `application/`.
    expect(looksLikeDeviceToken(`${encodeSegment({ typ: `Application/${DEVICE_TOKEN_TYPE.toUpperCase()}` })}.x.y`)).toBe(true);
    expect(looksLikeDeviceToken(`${encodeSegment({ typ: `text/${DEVICE_TOKEN_TYPE}` })}.x.y`)).toBe(false);
  });

  test('is false for a Medplum user token and for HS256 tokens of another or no type', async () => {
    expect(looksLikeDeviceToken(await createMedplumUserToken())).toBe(false);
    expect(looksLikeDeviceToken(await craftToken({ header: { typ: 'JWT' } }))).toBe(false);
    expect(looksLikeDeviceToken(await craftToken({ header: { typ: undefined } }))).toBe(false);
  });

  test('is false for a token that carries device claims in the payload but not the header type', async () => {
    const header = encodeSegment({ alg: 'HS256', typ: 'JWT' });
    expect(looksLikeDeviceToken(`${header}.${encodeSegment({ ...validClaims(), typ: DEVICE_TOKEN_TYPE })}.sig`)).toBe(false);
  });

  test.each(['', 'garbage', 'a.b.c', '.', `${encodeSegment(null)}.x.y`, `${encodeSegment('device+jwt')}.x.y`])(
    'is false, without throwing, for %j',
    (token) => {
      expect(looksLikeDeviceToken(token)).toBe(false);
    },
  );
});
