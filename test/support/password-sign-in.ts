/**
 * Email and password sign-in with MedplumClient, as a chat client's user signs in, with an S256 PKCE challenge.
 * MedplumClient makes its own challenge with `window.btoa`, which Node lacks: it then warns and falls back to
 * `plain`. Giving it an S256 challenge made here (and the verifier in its storage, where `processCode` reads it)
 * signs in as a browser does, without the warning.
 */
import { createHash, randomBytes } from 'node:crypto';
import { ClientStorage, MedplumClient } from '@medplum/core';

/** What a sign-in needs. */
export interface PasswordSignIn {
  readonly email: string;
  readonly password: string;
  readonly projectId: string;
}

/** Signs in with `startLogin` + `processCode`; resolves the signed-in client. */
export async function signInWithPassword(baseUrl: string, credentials: PasswordSignIn): Promise<MedplumClient> {
  const verifier = randomBytes(48).toString('base64url');
  const storage = new ClientStorage();
  storage.setString('codeVerifier', verifier);
  const client = new MedplumClient({ baseUrl, fetch, storage });
  const login = await client.startLogin({
    ...credentials,
    codeChallenge: createHash('sha256').update(verifier).digest('base64url'),
    codeChallengeMethod: 'S256',
  });
  if (!login.code) {
    throw new Error(`The sign-in of ${credentials.email} did not end with a code (memberships to choose, or MFA)`);
  }
  await client.processCode(login.code);
  return client;
}
