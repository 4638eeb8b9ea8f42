/**
 * Tokens (RFC 8725, JSON Web Token Best Current Practices): every forged, altered or misused token is a 401 on the
 * chat route, with nothing stored, no provider call and no outbound request (a `jku`/`x5u`/`jwk` header is never
 * followed).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, decodeJwt, decodeProtectedHeader, exportJWK, exportSPKI, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { SecurityContext } from './context.ts';
import { refused } from './suite.ts';

const KIND = 'tokens';
const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

export async function tokenAttacks(context: SecurityContext): Promise<void> {
  const { log, host } = context;
  // A server the attacker controls: any request to it means the key URL was followed.
  let trapHits = 0;
  const trap = createServer((_request, response) => {
    trapHits++;
    response.end('{}');
  });
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
  const trapUrl = `http://127.0.0.1:${(trap.address() as AddressInfo).port}/jwks.json`;

  const valid = context.tokenA;
  const header = decodeProtectedHeader(valid);
  const claims = decodeJwt(valid);
  const [, , validSignature] = valid.split('.');
  const now = Math.floor(Date.now() / 1000);
  const jwks = (await (await fetch(`${host.url}.well-known/jwks.json`)).json()) as { keys: JWK[] };
  const publicJwk = jwks.keys[0];
  const attacker = await generateKeyPair('RS256');
  const attackerJwk = { ...(await exportJWK(attacker.publicKey)), kid: 'attacker' };
  const signAsAttacker = (protectedHeader: Record<string, unknown>, payload: Record<string, unknown> = claims): Promise<string> =>
    new SignJWT(payload).setProtectedHeader({ alg: 'RS256', ...protectedHeader }).sign(attacker.privateKey);
  const unsigned = (alg: string): string => `${encode({ ...header, alg })}.${encode(claims)}.`;
  const signWithHostKey = (payload: Record<string, unknown>): Promise<string> =>
    new SignJWT(JSON.parse(JSON.stringify(payload)) as Record<string, unknown>)
      .setProtectedHeader({ alg: context.hostKeys.algorithm, kid: context.hostKeys.keyId })
      .sign(context.hostKeys.privateKey);
  const hmacWith = async (secret: string): Promise<string> =>
    new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: header.kid }).sign(new TextEncoder().encode(secret));

  const attempts: [string, () => Promise<string>][] = [
    ...['none', 'None', 'NONE', 'nOnE'].map((alg): [string, () => Promise<string>] => [`alg "${alg}", no signature`, async () => unsigned(alg)]),
    ['alg "none" with the original signature kept', async () => `${encode({ ...header, alg: 'none' })}.${encode(claims)}.${validSignature}`],
    ['HS256 signed with the public key as JSON (algorithm confusion)', () => hmacWith(JSON.stringify(publicJwk))],
    ['HS256 signed with the public key modulus (algorithm confusion)', () => hmacWith(String(publicJwk.n))],
    ['HS256 signed with the public key as PEM (algorithm confusion)', async () => hmacWith(await publicKeyPem(publicJwk))],
    ['unknown kid', () => signAsAttacker({ kid: 'no-such-key' })],
    ['kid path traversal', () => signAsAttacker({ kid: '../../../../../../dev/null' })],
    ['kid SQL injection', () => signAsAttacker({ kid: "x' UNION SELECT 'secret' --" })],
    ['jku pointing to the attacker', () => signAsAttacker({ kid: 'attacker', jku: trapUrl })],
    ['x5u pointing to the attacker', () => signAsAttacker({ kid: 'attacker', x5u: trapUrl })],
    ['jwk header carrying the attacker key', () => signAsAttacker({ kid: 'attacker', jwk: attackerJwk })],
    ['the real kid, signed by the attacker', () => signAsAttacker({ kid: header.kid })],
    // Signed with the host's own key (as an insider could), so that only the claim under test is wrong.
    ['no exp', () => signWithHostKey({ ...claims, exp: undefined })],
    ['expired', () => signWithHostKey({ ...claims, exp: now - 60, iat: now - 3600 })],
    ['not valid yet (nbf in the future)', () => signWithHostKey({ ...claims, nbf: now + 3600 })],
    ['another issuer', () => signWithHostKey({ ...claims, iss: 'https://evil.example/' })],
    ['another audience', () => signWithHostKey({ ...claims, aud: 'https://evil.example/' })],
    ['no audience', () => signWithHostKey({ ...claims, aud: undefined })],
    ['payload altered, signature kept', async () => `${valid.split('.')[0]}.${encode({ ...claims, profile: 'Practitioner/someone-else' })}.${validSignature}`],
    ['two segments', async () => valid.split('.').slice(0, 2).join('.')],
    ['four segments', async () => `${valid}.${validSignature}`],
    ['64 KB token', async () => `${valid.split('.')[0]}.${encode({ ...claims, padding: 'x'.repeat(64 * 1024) })}.${validSignature}`],
    ['a device token as a user token', async () => context.deviceTokenA],
    ['empty bearer', async () => ''],
  ];

  const storedBefore = await context.storedCommunications();
  const callsBefore = context.providerCalls();
  for (const [name, forge] of attempts) {
    await log.run(KIND, name, async () => {
      const token = await forge();
      const response = await context.chat(token, { messages: [{ role: 'user', content: 'Let me in.' }] });
      await response.arrayBuffer();
      const stored = (await context.storedCommunications()) !== storedBefore;
      const called = context.providerCalls() !== callsBefore;
      // A token too large for an HTTP header is refused by the HTTP server itself (431).
      return refused(response.status, [401, 431], stored ? 'a Communication was stored' : called ? 'the provider was called' : trapHits ? 'the key URL was followed' : undefined);
    });
  }
  trap.close();
}

async function publicKeyPem(jwk: JWK): Promise<string> {
  return exportSPKI((await importJWK(jwk, 'RS256')) as CryptoKey);
}
