/**
 * A device's rate limit on `/graphql`, end to end: the token exchange and the GraphQL requests counted together, a
 * document's mutations each taking a unit before any runs, and a request admitted at its token check answered
 * whatever the device's other requests spend meanwhile.
 */
import type { FhirRepository } from '@medplum/fhir-router';
import type { Device } from '@medplum/fhirtypes';
import { startTestHost, type TestHost, type TestHostOptions } from './support/test-host.ts';
import { sendWithBodyHeldBack } from './support/raw-http.ts';
import { observationInput as deviceObservation } from './support/observation-mutation.ts';
import { waitFor } from './support/wait-for.ts';
import { withWatchedReads, type WatchedReads } from './support/watched-reads.ts';

const SYSTEM = 'urn:example:devices';
const JWT_SECRET = 'graphql-test-device-signing-secret-0123456789';

function observationInput(deviceId: string, system = SYSTEM): Record<string, unknown> {
  return deviceObservation(deviceId, system);
}

describe('the device rate limit on /graphql', () => {
  test('counts the token exchange and the GraphQL requests of a device together', async () => {
    const { host, access } = await rateLimitedDevice(2);
    try {
      const post = () =>
        fetch(`${host.url}graphql`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` },
          body: JSON.stringify({ query: '{ __typename }' }),
        });

      expect((await post()).status).toBe(200);
      const limited = await post();
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await limited.json()) as { errors: { extensions: { code: string } }[] }).errors[0].extensions.code).toBe('RATE_LIMITED');
    } finally {
      await host.close();
    }
  });
});

describe("the device rate limit counts a document's mutations", () => {
  test('each aliased ObservationCreate takes one unit, all before any runs: a document over what is left writes nothing', async () => {
    const { host, access } = await rateLimitedDevice(5);
    try {
      const post = (query: string) =>
        fetch(`${host.url}graphql`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` },
          body: JSON.stringify({ query, variables: { input: observationInput('monitor-1') } }),
        });
      const creates = (count: number) =>
        `mutation ($input: ObservationInput!) { ${Array.from({ length: count }, (_, index) => `w${index}: ObservationCreate(resource: $input) { id }`).join(' ')} }`;
      const stored = async () => (await host.store.search({ resourceType: 'Observation', total: 'accurate', count: 0 })).total ?? 0;

      // A whole second's budget in one document: all five written, and nothing more this second.
      await nextSecond();
      const five = await post(creates(5));
      expect(five.status).toBe(200);
      expect(Object.keys(((await five.json()) as { data: Record<string, unknown> }).data)).toHaveLength(5);
      expect(await stored()).toBe(5);
      const after = await post('{ __typename }');
      expect(after.status).toBe(429);

      // More mutations than a second allows: refused outright, nothing written.
      await nextSecond();
      const six = await post(creates(6));
      expect(six.status).toBe(200);
      expect(await six.json()).toEqual({ errors: [{ message: expect.stringContaining('holds 6 mutations'), extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] });
      expect(await stored()).toBe(5);

      // Within a second's budget, but more than is left of it (the refused document's request took 1, these 2): the
      // rate limit's 429, nothing written.
      await post('{ __typename }');
      await post('{ __typename }');
      const three = await post(creates(3));
      expect(three.status).toBe(429);
      expect(Number(three.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await three.json()) as { errors: { extensions: { code: string } }[] }).errors[0].extensions.code).toBe('RATE_LIMITED');
      expect(await stored()).toBe(5);

      // The next second, the same document goes through.
      await nextSecond();
      expect((await post(creates(3))).status).toBe(200);
      expect(await stored()).toBe(8);
    } finally {
      await host.close();
    }
  });
});

describe('a device request admitted at its token check', () => {
  test("is answered, though another request of the device used up the second's budget while its body was on the way", async () => {
    let reads: WatchedReads<FhirRepository> | undefined;
    const { host, access } = await rateLimitedDevice(2, (store) => {
      reads = withWatchedReads<FhirRepository>(store);
      return reads.repo;
    });
    try {
      await nextSecond();
      // Its headers now, its body later: its token is checked (one unit of 2, then its Device read) before the body is read.
      const body = JSON.stringify({ query: '{ __typename }' });
      const admitted = reads?.nextRead('Device');
      const held = await sendWithBodyHeldBack(host.url, 'POST', '/graphql', { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` }, Buffer.byteLength(body), '');
      try {
        await admitted;
        // Meanwhile the same device sends a document of two mutations: its request takes the second unit, its other
        // mutation one more than the second has: the rate limit's 429, nothing written.
        const overspent = await fetch(`${host.url}graphql`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` },
          body: JSON.stringify({
            query: 'mutation ($input: ObservationInput!) { a: ObservationCreate(resource: $input) { id } b: ObservationCreate(resource: $input) { id } }',
            variables: { input: observationInput('monitor-1') },
          }),
        });
        expect(overspent.status).toBe(429);
        expect((await host.store.search({ resourceType: 'Observation', total: 'accurate', count: 0 })).total).toBe(0);

        // The first request costs nothing beyond the unit it was admitted with: it is answered.
        held.socket.write(body);
        expect(await held.answered(30_000)).toBe(200);
        const answer = await waitFor(async () => {
          const text = held.received();
          return text.endsWith('}') ? text.slice(text.indexOf('\r\n\r\n') + 4) : undefined;
        });
        expect(JSON.parse(answer)).toEqual({ data: { __typename: 'QueryType' } });
      } finally {
        held.socket.destroy();
      }
    } finally {
      await host.close();
    }
  });
});

/** Until the rate limit's current second is over, so that the next unit starts a second of its own. */
function nextSecond(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 1100));
}

/** A host whose one device, `monitor-1`, may make `perSecond` requests a second, and that device's token. */
async function rateLimitedDevice(perSecond: number, wrapStore?: TestHostOptions['wrapStore']): Promise<{ host: TestHost; access: string }> {
  const host = await startTestHost({
    wrapStore,
    pluginFor: (seeded) => ({
      device_auth: { valid_keys: { 'monitor-1': 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk' }, jwt_secret: JWT_SECRET, identifier_system: SYSTEM, project_id: seeded.projectId, rate_limit_per_second: perSecond },
    }),
  });
  const repo = await host.standalone.host.getSystemRepo(host.project?.projectId ?? '');
  await repo.createResource<Device>({ resourceType: 'Device', status: 'active', identifier: [{ system: SYSTEM, value: 'monitor-1' }] });
  const exchange = await fetch(`${host.url}account/api/token/device/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ device_id: 'monitor-1', api_key: 'key-monitor-1-aaaa-Lq7Vx2Nc9Rk' }),
  });
  const { access } = (await exchange.json()) as { access: string };
  return { host, access };
}
