/**
 * The host's token signing keys, kept as Medplum keeps them: `JsonWebKey` resources in the store, RS256, the
 * first active key signs and every active key verifies, public keys published as a JWKS. Several host
 * instances on one store therefore sign and verify with the same keys.
 */
import { Operator } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { JsonWebKey } from '@medplum/fhirtypes';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK, type JWSHeaderParameters } from 'jose';

const ALGORITHM = 'RS256';

/** The signing key and the public keys that verify. */
export interface SigningKeys {
  readonly keyId: string;
  readonly privateKey: CryptoKey;
  /** Public keys as served at `/.well-known/jwks.json`. */
  readonly jwks: { readonly keys: readonly JWK[] };
  /** Resolves the verification key named by a token's `kid`; throws for unknown or missing ids. */
  readonly resolveVerificationKey: (header: JWSHeaderParameters) => CryptoKey;
  readonly algorithm: typeof ALGORITHM;
}

/** Loads the active keys from the store, creating the first one on a fresh store. */
export async function loadSigningKeys(store: FhirRepository): Promise<SigningKeys> {
  let stored = await findActiveKeys(store);
  if (stored.length === 0) {
    const { privateKey } = await generateKeyPair(ALGORITHM, { extractable: true });
    const jwk = await exportJWK(privateKey);
    await store.createResource<JsonWebKey>({ resourceType: 'JsonWebKey', active: true, alg: ALGORITHM, ...jwk } as JsonWebKey);
    // Two instances starting on a fresh store may both create one; both then agree on the oldest.
    stored = await findActiveKeys(store);
  }
  const publicKeys = new Map<string, CryptoKey>();
  const jwks: JWK[] = [];
  for (const key of stored) {
    const publicJwk: JWK = { kid: key.id, alg: ALGORITHM, kty: 'RSA', use: 'sig', e: key.e, n: key.n };
    jwks.push(publicJwk);
    publicKeys.set(key.id, (await importJWK(publicJwk, ALGORITHM)) as CryptoKey);
  }
  const signing = stored[0];
  const privateKey = (await importJWK({ ...(signing as unknown as JWK), alg: ALGORITHM, use: 'sig' }, ALGORITHM)) as CryptoKey;
  return {
    keyId: signing.id,
    privateKey,
    jwks: { keys: jwks },
    algorithm: ALGORITHM,
    resolveVerificationKey: (header) => {
      const key = header.kid ? publicKeys.get(header.kid) : undefined;
      if (!key) {
        throw new Error('Unknown signing key');
      }
      return key;
    },
  };
}

async function findActiveKeys(store: FhirRepository): Promise<(JsonWebKey & { id: string })[]> {
  return store.searchResources<JsonWebKey>({
    resourceType: 'JsonWebKey',
    filters: [{ code: 'active', operator: Operator.EQUALS, value: 'true' }],
    sortRules: [{ code: '_lastUpdated' }],
    count: 100,
  });
}
