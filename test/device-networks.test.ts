/**
 * Device networks end to end, on a standalone host bound to 127.0.0.1 whose only trusted proxy is 127.0.0.2:
 * callers on other loopback addresses are untrusted peers, so an X-Forwarded-For they send must change nothing,
 * while the proxy's is believed. The token exchange and /graphql, the refusals on record, and the metric.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { AuditEvent } from '@medplum/fhirtypes';
import { startTestHost, TEST_METRICS_TOKEN, type TestHost } from './support/test-host.ts';
import { postJsonFrom, type ResponseFrom } from './support/from-address.ts';
import { CREATE_OBSERVATION, observationInput } from './support/observation-mutation.ts';

const SYSTEM = 'urn:example:ward-devices';
const MONITOR_KEY = 'Ward3-Monitor-Key-7Hc2Lw9vTq4Rb';
const PUMP_KEY = 'Pump-Key-anywhere-Qw72pK8sN3mXc';
const PROXY = '127.0.0.2';
const OUTSIDER = '127.0.0.3';
const WARD_MONITOR_ON_LOOPBACK = '127.0.0.5';
const WARD_ADDRESS = '10.20.3.14';

describe('device networks', () => {
  let host: TestHost;
  /** The host's info lines, as [message, fields]. */
  const infoLines: [string, Record<string, unknown> | undefined][] = [];
  const requestLines = (): Record<string, unknown>[] =>
    infoLines.flatMap(([message, fields]) => (message === 'fhirgate request' && fields?.route === '/account/api/token/device/' ? [fields] : []));

  beforeAll(async () => {
    host = await startTestHost({
      metrics: true,
      logger: { debug: () => undefined, info: (message, fields) => infoLines.push([message, fields]), warn: () => undefined, error: () => undefined },
      hostLimits: { trustProxy: [PROXY] },
      pluginFor: (seeded) => ({
        device_auth: {
          valid_keys: { 'ward3-monitor': MONITOR_KEY, 'pump-anywhere': PUMP_KEY },
          jwt_secret: 'ward-device-signing-secret-0123456789abcdef',
          identifier_system: SYSTEM,
          project_id: seeded.projectId,
          auto_register: true,
          allowed_networks_per_device: { 'ward3-monitor': ['10.20.3.0/24', WARD_MONITOR_ON_LOOPBACK] },
          // Short periods, so refusals are recorded one by one in each test's own period.
          failed_attempts_window_seconds: 1,
        },
      }),
    });
  });

  afterAll(async () => {
    await host?.close();
  });

  const exchange = (from: string, deviceId: string, apiKey: string, headers: Record<string, string> = {}): Promise<ResponseFrom> =>
    postJsonFrom(`${host.url}account/api/token/device/`, from, { device_id: deviceId, api_key: apiKey }, headers);
  // The spec's mutation, as a monitor sends a heart rate.
  const recordHeartRate = (from: string, token: string, headers: Record<string, string> = {}): Promise<ResponseFrom> =>
    postJsonFrom(
      `${host.url}graphql`,
      from,
      { query: CREATE_OBSERVATION.loc?.source.body, variables: { input: observationInput('ward3-monitor', SYSTEM, 72) } },
      { Authorization: `Bearer ${token}`, ...headers },
    );
  const storedObservations = async (): Promise<number> =>
    (await host.store.search({ resourceType: 'Observation', total: 'accurate', count: 0 })).total ?? 0;
  const refusalsFrom = async (address: string): Promise<AuditEvent[]> => {
    const bundle = await host.store.search<AuditEvent>({ resourceType: 'AuditEvent', filters: [{ code: 'address', operator: 'eq', value: address }], count: 100 });
    return (bundle.entry ?? []).flatMap((entry) => (entry.resource?.outcome === '4' ? [entry.resource] : []));
  };
  const reasonOf = (event: AuditEvent): string | undefined => event.entity?.[0]?.detail?.find((detail) => detail.type === 'reason')?.valueString;

  test('the right key from outside the device\'s networks gets the same 403 as a wrong key, and is on record with the address and the reason', async () => {
    const outside = await exchange(OUTSIDER, 'ward3-monitor', MONITOR_KEY);
    const wrongKey = await exchange(WARD_MONITOR_ON_LOOPBACK, 'ward3-monitor', `${MONITOR_KEY.slice(0, -1)}x`);
    expect(outside.status).toBe(403);
    expect(wrongKey.status).toBe(403);
    expect(outside.body).toEqual(wrongKey.body);
    const events = await refusalsFrom(OUTSIDER);
    expect(events.map(reasonOf)).toEqual(['outside_network']);
    expect(events[0]?.agent?.[0]?.network?.address).toBe(OUTSIDER);
    expect(events[0]?.outcomeDesc).toBe("Device refused: source address outside the device's allowed networks");
    const metrics = await (await fetch(`${host.url}metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } })).text();
    expect(metrics).toMatch(/fhirgate_device_token_exchanges_total\{[^}]*fhirgate_reason="outside_network"[^}]*\} 1\b/);
    // The request's log line names the device and the refusal.
    expect(requestLines()).toContainEqual(expect.objectContaining({ status: 403, deviceId: 'ward3-monitor', refusal: 'outside_network' }));
  });

  test('inside its networks (directly, or forwarded by the trusted proxy) the device gets its token; each issuance logged and counted', async () => {
    const issuedBefore = infoLines.filter(([message]) => message === 'Device token issued').length;
    expect((await exchange(WARD_MONITOR_ON_LOOPBACK, 'ward3-monitor', MONITOR_KEY)).status).toBe(200);
    expect((await exchange(PROXY, 'ward3-monitor', MONITOR_KEY, { 'X-Forwarded-For': WARD_ADDRESS })).status).toBe(200);
    const issued = infoLines.filter(([message]) => message === 'Device token issued').slice(issuedBefore);
    expect(issued).toEqual([0, 1].map(() => ['Device token issued', { deviceId: 'ward3-monitor', device: expect.stringMatching(/^Device\/[\w-]+$/), requestId: expect.any(String) }]));
    const device = issued[0][1]?.device;
    expect(requestLines().filter((line) => line.status === 200)).toEqual([0, 1].map(() => expect.objectContaining({ deviceId: 'ward3-monitor', caller: device })));
    const metrics = await (await fetch(`${host.url}metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } })).text();
    expect(metrics).toMatch(/fhirgate_device_token_exchanges_total\{[^}]*fhirgate_outcome="issued"[^}]*\} 2\b/);
  });

  test('an untrusted peer claiming a ward address in X-Forwarded-For is refused, and recorded under its own address', async () => {
    const spoofed = await exchange(OUTSIDER, 'ward3-monitor', MONITOR_KEY, { 'X-Forwarded-For': WARD_ADDRESS });
    expect(spoofed.status).toBe(403);
    expect(spoofed.body).toEqual({ error: expect.objectContaining({ message: 'Invalid device credentials.' }) });
    expect(await refusalsFrom(WARD_ADDRESS)).toEqual([]);
  });

  test('the trusted proxy forwarding an address outside the networks is refused, on record under that address', async () => {
    const forwarded = await exchange(PROXY, 'ward3-monitor', MONITOR_KEY, { 'X-Forwarded-For': '10.20.4.14' });
    expect(forwarded.status).toBe(403);
    expect((await refusalsFrom('10.20.4.14')).map(reasonOf)).toEqual(['outside_network']);
  });

  test('a device without a list may come from anywhere', async () => {
    expect((await exchange(OUTSIDER, 'pump-anywhere', PUMP_KEY)).status).toBe(200);
  });

  test("/graphql refuses the device's token presented from outside its networks (spoofed or not), on record; inside, its heart rate is stored", async () => {
    const issued = await exchange(PROXY, 'ward3-monitor', MONITOR_KEY, { 'X-Forwarded-For': WARD_ADDRESS });
    const token = (issued.body as { access: string }).access;
    const carriedOff = '127.0.0.7';
    for (const headers of [{}, { 'X-Forwarded-For': WARD_ADDRESS }] as Record<string, string>[]) {
      const refused = await recordHeartRate(carriedOff, token, headers);
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({ errors: [expect.objectContaining({ message: 'The device token is not accepted from this network.', extensions: expect.objectContaining({ code: 'FORBIDDEN' }) })] });
    }
    expect(await storedObservations()).toBe(0);
    const events = await refusalsFrom(carriedOff);
    expect(events.map(reasonOf)).toEqual(['outside_network', 'outside_network']);
    expect(events[0]?.agent?.[0]?.who?.reference).toMatch(/^Device\//);
    const inside = await recordHeartRate(PROXY, token, { 'X-Forwarded-For': WARD_ADDRESS });
    expect(inside.status).toBe(200);
    expect(inside.body).toEqual({ data: { ObservationCreate: expect.objectContaining({ id: expect.any(String), status: 'final' }) } });
    expect(await storedObservations()).toBe(1);
  });
});
