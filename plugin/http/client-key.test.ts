import { basicTokenOf, readBearerClientKey, readClientKey } from './client-key.ts';

const ID = '3f2c9a1e-7b4d-4c2a-9e8f-0a1b2c3d4e5f';

describe('client keys', () => {
  test('a bearer token written as <client id>:<secret> is a key; a JWT, an empty part or whitespace is not', () => {
    expect(readClientKey({ authorization: `Bearer ${ID}:s3cret` })).toEqual({ clientId: ID, secret: 's3cret' });
    // A secret may hold a colon: only the first one separates.
    expect(readClientKey({ authorization: `Bearer ${ID}:a:b` })).toEqual({ clientId: ID, secret: 'a:b' });
    for (const authorization of ['Bearer eyJhbGciOiJFUzM4NCJ9.eyJzdWIiOiJ4In0.c2ln', `Bearer ${ID}:`, 'Bearer :secret', 'Bearer a/b:secret', `Bearer ${'x'.repeat(65)}:secret`, `Token ${ID}:s3cret`]) {
      expect(readClientKey({ authorization })).toBeUndefined();
    }
    expect(readClientKey({})).toBeUndefined();
  });

  test('Basic auth carries the same key, as Medplum reads it', () => {
    const key = { clientId: ID, secret: 's3cret' };
    expect(readClientKey({ authorization: `Basic ${basicTokenOf(key)}` })).toEqual(key);
    expect(readBearerClientKey({ authorization: `Basic ${basicTokenOf(key)}` })).toBeUndefined();
    expect(readClientKey({ authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` })).toBeUndefined();
    expect(Buffer.from(basicTokenOf(key), 'base64').toString()).toBe(`${ID}:s3cret`);
  });
});
