/**
 * Access tokens in Medplum's format: RS256 JWTs with header `kid` and `typ: JWT`, claims `login_id`, `sub`,
 * `username`, `scope`, `profile`, `client_id`, issued by the host's issuer URL, one hour by default; and, as
 * Medplum's, refresh tokens (claims `login_id`, `refresh_secret`) for a sign-in with "Remember me".
 */
import { SignJWT, jwtVerify, type JWTPayload } from 'jose';
import type { SigningKeys } from './signing-keys.ts';

/** Claims of a Medplum access token. */
export interface AccessTokenClaims extends JWTPayload {
  readonly login_id: string;
  readonly sub: string;
  readonly username: string;
  readonly scope: string;
  /** The caller's profile, e.g. `Practitioner/123`. */
  readonly profile: string;
  readonly client_id?: string;
}

/** Claims of a Medplum refresh token: the Login it renews and the Login's current refresh secret. */
export interface RefreshTokenClaims extends JWTPayload {
  readonly login_id: string;
  readonly refresh_secret: string;
}

/** Signs and verifies access tokens (and the refresh tokens of "Remember me" sign-ins) for one issuer. */
export interface AccessTokenService {
  readonly lifetimeSeconds: number;
  sign(claims: AccessTokenClaims): Promise<string>;
  /** The token's claims when its signature, issuer, algorithm and expiry check out; otherwise undefined. */
  verify(token: string): Promise<AccessTokenClaims | undefined>;
  /** A refresh token for a Login and its refresh secret, valid two weeks (Medplum's default). */
  signRefresh(loginId: string, refreshSecret: string): Promise<string>;
  /** A refresh token's claims when it checks out; never the claims of an access token, nor an access token of these. */
  verifyRefresh(token: string): Promise<RefreshTokenClaims | undefined>;
}

/** Options of the access token service. */
export interface AccessTokenServiceOptions {
  readonly keys: SigningKeys;
  /** The server's base URL, e.g. `http://localhost:8103/`, as Medplum's `issuer`. */
  readonly issuer: string;
  readonly lifetimeSeconds?: number;
}

/** Medplum's default refresh token lifetime. */
const REFRESH_LIFETIME_SECONDS = 14 * 24 * 3600;

/** Creates the access token service. */
export function createAccessTokenService(options: AccessTokenServiceOptions): AccessTokenService {
  const { keys, issuer } = options;
  const lifetimeSeconds = options.lifetimeSeconds ?? 3600;
  return {
    lifetimeSeconds,
    sign: (claims) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: keys.algorithm, kid: keys.keyId, typ: 'JWT' })
        .setIssuedAt()
        .setIssuer(issuer)
        .setAudience(claims.client_id ?? issuer)
        .setExpirationTime(`${lifetimeSeconds}s`)
        .sign(keys.privateKey),
    verify: async (token) => {
      try {
        const { payload } = await jwtVerify(token, keys.resolveVerificationKey, {
          issuer,
          algorithms: [keys.algorithm],
          requiredClaims: ['exp', 'iat', 'login_id', 'sub', 'profile'],
        });
        // The audience is the client the token was issued to, or this server for a login without one.
        const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
        const expected = typeof payload.client_id === 'string' ? payload.client_id : issuer;
        return isAccessTokenClaims(payload) && audiences.includes(expected) ? payload : undefined;
      } catch {
        return undefined;
      }
    },
    signRefresh: (loginId, refreshSecret) =>
      new SignJWT({ login_id: loginId, refresh_secret: refreshSecret })
        .setProtectedHeader({ alg: keys.algorithm, kid: keys.keyId, typ: 'JWT' })
        .setIssuedAt()
        .setIssuer(issuer)
        .setAudience(issuer)
        .setExpirationTime(`${REFRESH_LIFETIME_SECONDS}s`)
        .sign(keys.privateKey),
    verifyRefresh: async (token) => {
      try {
        const { payload } = await jwtVerify(token, keys.resolveVerificationKey, {
          issuer,
          audience: issuer,
          algorithms: [keys.algorithm],
          requiredClaims: ['exp', 'login_id', 'refresh_secret'],
        });
        // An access token names a profile and a subject; a refresh token neither.
        return typeof payload.login_id === 'string' && typeof payload.refresh_secret === 'string' && payload.profile === undefined && payload.sub === undefined
          ? (payload as RefreshTokenClaims)
          : undefined;
      } catch {
        return undefined;
      }
    },
  };
}

function isAccessTokenClaims(payload: JWTPayload): payload is AccessTokenClaims {
  return (
    typeof payload.login_id === 'string' &&
    typeof payload.sub === 'string' &&
    typeof payload.profile === 'string' &&
    // A device token (issued by the plugin) is never a user token.
    payload.is_device === undefined
  );
}
