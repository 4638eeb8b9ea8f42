/**
 * Devices on `/graphql` end to end: a device exchanges its key for a token, then posts the spec's exact
 * `ObservationCreate` mutation with a real GraphQL client (urql); MedplumClient reads back what was stored.
 * Also: spoofed device identifiers, other writes, tokens that must be refused, users on the same endpoint.
 */
import { Client, fetchExchange, gql, type CombinedError } from '@urql/core';
import { MedplumClient } from '@medplum/core';
import type { Device, Observation } from '@medplum/fhirtypes';
import { SignJWT } from 'jose';
import { CREATE_OBSERVATION, observationInput as deviceObservation } from './support/observation-mutation.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';

const SYSTEM = 'urn:example:devices';
const JWT_SECRET = 'graphql-test-device-signing-secret-0123456789';

function observationInput(deviceId: string, system = SYSTEM): Record<string, unknown> {
  return deviceObservation(deviceId, system);
}

describe('POST /graphql with device tokens', () => {
  let host: TestHost;
  let project: SeededProject;
  let monitor: Device;
  let other: Device;
  let medplum: MedplumClient;

  beforeAll(async () => {
    host = await startTestHost({
      pluginFor: (seeded) => ({
        device_auth: {
          valid_keys: { 'monitor-1': 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk', 'monitor-2': 'key-monitor-2-bbbb-Tz4Hw8Pm3Gd' },
          jwt_secret: JWT_SECRET,
          identifier_system: SYSTEM,
          project_id: seeded.projectId,
          token_expiry_minutes: 5,
          // High enough for the tests below; the last test shows the limit on this route.
          rate_limit_per_second: 1000,
        },
      }),
    });
    project = host.project as SeededProject;
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    monitor = await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'monitor-1' }] });
    other = await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'monitor-2' }] });
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  });

  afterAll(async () => {
    await host.close();
  });

  async function deviceToken(deviceId: string, apiKey: string): Promise<string> {
    const response = await fetch(`${host.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: deviceId, api_key: apiKey }),
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { access: string }).access;
  }

  function graphqlClient(token: string, headers: Record<string, string> = {}): Client {
    return new Client({
      url: `${host.url}graphql`,
      exchanges: [fetchExchange],
      preferGetMethod: false,
      requestPolicy: 'network-only',
      fetchOptions: { headers: { Authorization: `Bearer ${token}`, ...headers } },
    });
  }

  async function storedObservations(): Promise<Observation[]> {
    return medplum.searchResources('Observation', { _count: '1000' }, { cache: 'no-cache' });
  }

  function codesOf(error: CombinedError | undefined): unknown[] {
    return error?.graphQLErrors.map((graphqlError) => graphqlError.extensions?.code) ?? [];
  }

  test("the spec's mutation creates the Observation, linked to the device's Device and authored by it", async () => {
    const client = graphqlClient(await deviceToken('monitor-1', 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk'));

    const result = await client.mutation(CREATE_OBSERVATION, { input: observationInput('monitor-1') }).toPromise();

    expect(result.error).toBeUndefined();
    const created = result.data.ObservationCreate;
    expect(created).toEqual({
      id: expect.any(String),
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      device: { identifier: { system: SYSTEM, value: 'monitor-1' } },
    });
    const stored = await medplum.readResource('Observation', created.id);
    expect(stored.device).toEqual({ reference: `Device/${monitor.id}`, identifier: { system: SYSTEM, value: 'monitor-1' } });
    expect(stored.meta?.author?.reference).toBe(`Device/${monitor.id}`);
    expect(stored.meta?.project).toBe(project.projectId);
  });

  test.each([
    ['another device id', () => observationInput('monitor-2')],
    ['another identifier system', () => observationInput('monitor-1', 'urn:other')],
    ['no device at all', () => ({ status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] } })],
  ])('an Observation naming %s is FORBIDDEN and nothing is stored', async (_name, input) => {
    const client = graphqlClient(await deviceToken('monitor-1', 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk'));
    const before = (await storedObservations()).length;

    const result = await client.mutation(CREATE_OBSERVATION, { input: input() }).toPromise();

    expect(codesOf(result.error)).toEqual(['FORBIDDEN']);
    expect(result.data?.ObservationCreate ?? null).toBeNull();
    expect(await storedObservations()).toHaveLength(before);
  });

  test('other writes are FORBIDDEN for a device; it reads its own Device but not another one', async () => {
    const client = graphqlClient(await deviceToken('monitor-1', 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk'));

    const patient = await client.mutation(gql`mutation { PatientCreate(res: { resourceType: "Patient", name: [{ family: "X" }] }) { id } }`, {}).toPromise();
    expect(codesOf(patient.error)).toEqual(['FORBIDDEN']);

    const own = await client.query(gql`query ($id: ID!) { Device(id: $id) { id status } }`, { id: monitor.id }).toPromise();
    expect(own.data?.Device).toEqual({ id: monitor.id, status: 'active' });
    const foreign = await client.query(gql`query ($id: ID!) { Device(id: $id) { id } }`, { id: other.id }).toPromise();
    expect(foreign.data?.Device ?? null).toBeNull();
    // As if it did not exist: NOT_FOUND, never a server error, and nothing of it in the message.
    expect(codesOf(foreign.error)).toEqual(['NOT_FOUND']);
    expect(foreign.error?.graphQLErrors.map((error) => error.message)).toEqual(['Not found']);
  });

  test('a device lists only its own Observations', async () => {
    const mine = graphqlClient(await deviceToken('monitor-1', 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk'));
    const theirs = graphqlClient(await deviceToken('monitor-2', 'key-monitor-2-bbbb-Tz4Hw8Pm3Gd'));
    await theirs.mutation(CREATE_OBSERVATION, { input: observationInput('monitor-2') }).toPromise();

    const listed = await mine.query(gql`{ ObservationList(_count: 100) { id device { reference } } }`, {}).toPromise();
    expect(listed.error).toBeUndefined();
    expect(listed.data.ObservationList.length).toBeGreaterThan(0);
    for (const observation of listed.data.ObservationList) {
      expect(observation.device.reference).toBe(`Device/${monitor.id}`);
    }
  });

  test.each([
    ['an expired token', async () => signDeviceToken({ exp: Math.floor(Date.now() / 1000) - 10 })],
    ['a token signed with another secret', async () => signDeviceToken({}, 'another-secret-another-secret-another-secret')],
    ['a tampered token', async () => tamper(await deviceToken('monitor-1', 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk'))],
    ['a user token without X-Project-ID', async () => host.accessTokenFor(project.ids['practitioner-membership'])],
    ['no token at all', async () => ''],
  ])('%s is a 401 with an UNAUTHENTICATED error, and nothing is stored', async (_name, makeToken) => {
    const token = await makeToken();
    const before = (await storedObservations()).length;
    const response = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query: CREATE_OBSERVATION.loc?.source.body, variables: { input: observationInput('monitor-1') } }),
    });
    expect(response.status).toBe(401);
    expect(((await response.json()) as { errors: { extensions: { code: string } }[] }).errors[0].extensions.code).toBe('UNAUTHENTICATED');
    expect(await storedObservations()).toHaveLength(before);
  });

  test("a deactivated Device's token stops working at once", async () => {
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    const pump = await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'monitor-2' }] });
    const token = await signDeviceToken({ sub: 'monitor-2', entity_id: pump.id });
    await repo.updateResource<Device>({ ...pump, status: 'inactive' });

    const result = await graphqlClient(token).mutation(CREATE_OBSERVATION, { input: observationInput('monitor-2') }).toPromise();
    expect(codesOf(result.error)).toEqual(['UNAUTHENTICATED']);
  });

  test("a renamed Device's token stops working at once; one with more identifiers than its own keeps working", async () => {
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    const named = await repo.createResource<Device>({
      resourceType: 'Device',
      status: 'active',
      identifier: [{ system: 'urn:example:serial', value: 'SN-7' }, { system: SYSTEM, value: 'monitor-2' }],
    });
    const token = await signDeviceToken({ sub: 'monitor-2', entity_id: named.id });
    const stored = await graphqlClient(token).mutation(CREATE_OBSERVATION, { input: observationInput('monitor-2') }).toPromise();
    expect(stored.error).toBeUndefined();

    for (const identifier of [
      [{ system: SYSTEM, value: 'monitor-9' }],
      [{ system: 'urn:other', value: 'monitor-2' }],
      undefined,
    ]) {
      const current = await repo.readResource<Device>('Device', named.id as string);
      await repo.updateResource<Device>({ ...current, identifier });
      const response = await fetch(`${host.url}graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: CREATE_OBSERVATION.loc?.source.body, variables: { input: observationInput('monitor-2') } }),
      });
      expect(response.status).toBe(401);
      expect(await response.json()).toEqual({
        errors: [{ message: 'The device token is no longer valid: its Device is gone, renamed or not active.', extensions: { code: 'UNAUTHENTICATED' } }],
      });
    }
    // Gone altogether: the same 401, never a server error.
    await repo.deleteResource('Device', named.id as string);
    const gone = await graphqlClient(token).mutation(CREATE_OBSERVATION, { input: observationInput('monitor-2') }).toPromise();
    expect(codesOf(gone.error)).toEqual(['UNAUTHENTICATED']);
  });

  test("a device's document naming another resource type is refused by its scope, before anything runs", async () => {
    const client = graphqlClient(await deviceToken('monitor-1', 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk'));
    const patients = await client.query(gql`{ PatientList { id } }`, {}).toPromise();
    expect(codesOf(patients.error)).toEqual(['FORBIDDEN']);
    expect(patients.error?.graphQLErrors[0]?.message).toMatch(/^A device may only read and write its Observations and read its own Device/);
    // A type named only in a variable's declaration is refused alike.
    const declared = await client.query(gql`query ($patient: PatientInput) { ObservationList { id } }`, {}).toPromise();
    expect(codesOf(declared.error)).toEqual(['FORBIDDEN']);
    expect(declared.error?.graphQLErrors[0]?.message).toContain('the type PatientInput is not allowed.');
  });

  test('without a valid token the answer is 401 before the body is read, however large; GET is 405 naming POST', async () => {
    const huge = JSON.stringify({ query: `{ __typename }`, padding: 'x'.repeat(3 * 1024 * 1024) });
    const unauthenticated = await fetch(`${host.url}graphql`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer not-a-token' }, body: huge });
    expect(unauthenticated.status).toBe(401);
    const forged = await fetch(`${host.url}graphql`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${await signDeviceToken({}, 'another-secret-another-secret-another-secret')}` }, body: huge });
    expect(forged.status).toBe(401);
    expect(((await forged.json()) as { errors: { message: string }[] }).errors[0].message).toBe('Missing, invalid or expired device token.');

    const get = await fetch(`${host.url}graphql?query=%7B__typename%7D`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  test("a user's Medplum token works on the same endpoint under the user's AccessPolicy", async () => {
    const practitioner = graphqlClient(await host.accessTokenFor(project.ids['practitioner-membership']), { 'X-Project-ID': project.projectId });
    const patients = await practitioner.query(gql`{ PatientList { id } }`, {}).toPromise();
    expect(patients.error).toBeUndefined();
    expect(patients.data.PatientList.map((patient: { id: string }) => patient.id).sort()).toEqual(
      [project.ids['patient-in-care-team-1'], project.ids['patient-in-care-team-2']].sort(),
    );

    const integration = graphqlClient(await host.accessTokenFor(project.ids['client-membership']), { 'X-Project-ID': project.projectId });
    const created = await integration.mutation(CREATE_OBSERVATION, { input: observationInput('monitor-1') }).toPromise();
    expect(created.error).toBeUndefined();
    expect(created.data.ObservationCreate.device.identifier.value).toBe('monitor-1');
  });

  test('a batch (JSON array) is a 400, and an introspection query is refused', async () => {
    const token = await deviceToken('monitor-1', 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk');
    const batch = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify([{ query: '{ __typename }' }, { query: '{ __typename }' }]),
    });
    expect(batch.status).toBe(400);

    const introspection = await graphqlClient(token).query(gql`{ __schema { types { name } } }`, {}).toPromise();
    expect(codesOf(introspection.error)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
  });

  async function signDeviceToken(claims: Record<string, unknown>, secret = JWT_SECRET): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ entity_id: monitor.id, is_device: true, sub: 'monitor-1', iat: now - 60, exp: now + 300, jti: 'test', ...claims })
      .setProtectedHeader({ alg: 'HS256', typ: 'device+jwt' })
      .setAudience('urn:fhirgate:device')
      .sign(new TextEncoder().encode(secret));
  }
});

function tamper(token: string): string {
  const [header, payload, signature] = token.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
  return [header, Buffer.from(JSON.stringify({ ...claims, sub: 'monitor-2' })).toString('base64url'), signature].join('.');
}
