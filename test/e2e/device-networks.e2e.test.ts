/**
 * End to end, from the outside, on any server with fhirgate mounted on loopback (e2e-target.ts): a ward's device,
 * allowed only from the ward's address (`allowed_networks_per_device`), reaches the server through a reverse proxy
 * that appends its caller's address to `X-Forwarded-For` (loopback-proxy.ts, connecting from `E2E_PROXY_ADDRESS`,
 * the one proxy the server trusts), and other callers reach it directly or through the same proxy:
 * - from outside its networks, the right key gets the wrong key's 403, its token is refused on `/graphql`, nothing is
 *   stored, and each refusal is an AuditEvent with the reason `outside_network` and the caller's address;
 * - a caller that is not the trusted proxy writing the ward's address into `X-Forwarded-For`, directly or through
 *   the proxy (which appends the caller's real address), changes nothing;
 * - through the proxy from the ward's address, it gets its token and its heart rate is stored, as the device.
 * Callers are told apart by their loopback source address (127.0.0.0/8 is all loopback on Linux). Skipped, with a
 * notice, when the target has no device_auth file or is not on loopback.
 */
import type { AuditEvent, Observation } from '@medplum/fhirtypes';
import { postJsonFrom, type ResponseFrom } from '../support/from-address.ts';
import { CREATE_OBSERVATION, observationInput } from '../support/observation-mutation.ts';
import { connectE2eTarget, E2E_PROXY_ADDRESS, E2E_WARD_ADDRESS, type E2eDevice, type E2eTarget } from './e2e-target.ts';
import { startLoopbackProxy, type LoopbackProxy } from './loopback-proxy.ts';

/** A caller on loopback that is neither the ward nor the proxy: a copied key used off the ward. */
const OUTSIDER = '127.0.0.3';
/** Another such caller, for the wrong key the outsider's refusal is compared with. */
const GUESSER = '127.0.0.4';
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

describe('fhirgate end to end: device networks', () => {
  let target: E2eTarget;
  let proxy: LoopbackProxy | undefined;
  let ward: E2eDevice | undefined;

  beforeAll(async () => {
    target = await connectE2eTarget({ wardDevice: true });
    ward = target.wardDevice;
    if (!ward) {
      process.stderr.write('fhirgate e2e: no device_auth file given (--device-auth-file): the device networks checks are skipped\n');
      return;
    }
    if (!LOOPBACK_HOSTS.has(new URL(target.baseUrl).hostname)) {
      process.stderr.write(`fhirgate e2e: ${target.baseUrl} is not on loopback: the device networks checks, which call it from chosen loopback addresses, are skipped\n`);
      ward = undefined;
      return;
    }
    if (ward.addedToFile) {
      throw new Error(
        `fhirgate e2e: device ${ward.id} and its network were just written to ${process.env.E2E_DEVICE_AUTH_FILE}: restart the server (FHIRGATE_DEVICE_AUTH=${process.env.E2E_DEVICE_AUTH_FILE}) so it reads them, then run the suite again`
      );
    }
    proxy = await startLoopbackProxy(target.baseUrl, E2E_PROXY_ADDRESS);
  }, 180_000);

  afterAll(async () => {
    await proxy?.close();
    await target?.close();
  });

  const directly = (): string => target.baseUrl;
  const throughProxy = (): string => proxy?.url ?? '';
  const exchange = (base: string, from: string, apiKey: string, headers: Record<string, string> = {}): Promise<ResponseFrom> =>
    postJsonFrom(`${base}account/api/token/device/`, from, { device_id: ward?.id, api_key: apiKey }, headers);
  const recordHeartRate = (base: string, from: string, token: string, value: number, headers: Record<string, string> = {}): Promise<ResponseFrom> =>
    postJsonFrom(
      `${base}graphql`,
      from,
      { query: CREATE_OBSERVATION.loc?.source.body, variables: { input: observationInput(ward?.id ?? '', ward?.identifierSystem ?? '', value) } },
      { Authorization: `Bearer ${token}`, ...headers }
    );
  /** The device's Observations of `value`, read back by the project administrator. */
  const storedWith = async (value: number): Promise<Observation[]> => {
    const stored = await target.admin.searchResources('Observation', { device: `Device/${ward?.resourceId}`, _count: '1000' }, { cache: 'no-cache' });
    return stored.filter((observation: Observation) => observation.valueQuantity?.value === value);
  };
  /** The AuditEvents recorded since `since` with `address` as the caller's address (`agent.network.address`). */
  const auditsFrom = async (address: string, since: string): Promise<AuditEvent[]> =>
    (await target.admin.searchResources('AuditEvent', { address, date: `ge${since}`, _count: '100' }, { cache: 'no-cache' })) as AuditEvent[];
  const reasonOf = (event: AuditEvent): string | undefined => event.entity?.[0]?.detail?.find((detail) => detail.type === 'reason')?.valueString;
  const refusalsOf = (events: AuditEvent[]): (string | undefined)[] => events.filter((event) => event.outcome === '4').map(reasonOf);
  /** A marker for this run's heart rates, so runs never meet. */
  const marker = (): number => 7000 + Math.floor(Math.random() * 1000);
  /** A token of the ward's device, taken through the proxy from the ward. */
  const wardToken = async (): Promise<string> => {
    const issued = await exchange(throughProxy(), E2E_WARD_ADDRESS, ward?.key ?? '');
    expect(issued.status).toBe(200);
    return (issued.body as { access: string }).access;
  };

  test("the ward's device from outside its networks: the wrong key's 403, its token refused on /graphql, nothing stored, each refusal on record with the reason and the address", async () => {
    if (!ward) {
      return;
    }
    const since = new Date().toISOString();
    const outside = await exchange(directly(), OUTSIDER, ward.key);
    const wrongKey = await exchange(directly(), GUESSER, `${ward.key}-wrong`);
    expect(outside.status).toBe(403);
    expect(outside.body).toEqual(wrongKey.body);

    const token = await wardToken();
    const value = marker();
    const carriedOff = await recordHeartRate(directly(), OUTSIDER, token, value);
    expect(carriedOff.status).toBe(403);
    expect(carriedOff.body).toEqual({ errors: [expect.objectContaining({ extensions: expect.objectContaining({ code: 'FORBIDDEN' }) })] });
    expect(await storedWith(value)).toEqual([]);

    const events = await auditsFrom(OUTSIDER, since);
    expect(refusalsOf(events)).toEqual(['outside_network', 'outside_network']);
    for (const event of events) {
      expect(event.agent?.[0]?.network?.address).toBe(OUTSIDER);
      expect(event.outcomeDesc).toBe("Device refused: source address outside the device's allowed networks");
    }
    // On /graphql the token names the Device: the refusal is the device's.
    expect(events.map((event) => event.agent?.[0]?.who?.reference)).toContain(`Device/${ward.resourceId}`);
  }, 60_000);

  test("a caller that is not the trusted proxy claiming the ward's address in X-Forwarded-For changes nothing, directly or through the proxy", async () => {
    if (!ward) {
      return;
    }
    const since = new Date().toISOString();
    const claim = { 'X-Forwarded-For': E2E_WARD_ADDRESS };
    // The proxy appends the caller's own address: the ward's address the caller wrote before it is not believed.
    const viaProxy = await exchange(throughProxy(), OUTSIDER, ward.key, claim);
    expect(viaProxy.status).toBe(403);
    const direct = await exchange(directly(), OUTSIDER, ward.key, claim);
    if (direct.status === 200) {
      throw new Error(
        `The ward's key from ${OUTSIDER}, a caller that is not the proxy (${E2E_PROXY_ADDRESS}), writing the ward's address into X-Forwarded-For got a token. ` +
          `Either the server believes X-Forwarded-For from every caller, as Medplum's own app.set('trust proxy', 1) does: name the proxy instead ` +
          `(docs/mounting.md, 4. Configuration; the standalone host: FHIRGATE_TRUST_PROXY=${E2E_PROXY_ADDRESS}), or let nothing but the proxy reach its port; or it does not apply the device's networks`
      );
    }
    expect(direct.status).toBe(403);
    expect(direct.body).toEqual(viaProxy.body);

    const token = await wardToken();
    const value = marker();
    const spoofed = await recordHeartRate(directly(), OUTSIDER, token, value, claim);
    expect(spoofed.status).toBe(403);
    expect(await storedWith(value)).toEqual([]);

    // Each refusal is recorded under the caller's real address; the ward's address gained only the token it got itself.
    expect(refusalsOf(await auditsFrom(OUTSIDER, since))).toEqual(['outside_network', 'outside_network', 'outside_network']);
    const atWard = await auditsFrom(E2E_WARD_ADDRESS, since);
    expect(atWard.map((event) => event.outcomeDesc)).toEqual(['Device token issued']);
  }, 60_000);

  test("the ward's device through the trusted proxy: its token, its heart rate stored as the device, the exchange on record from the ward's address", async () => {
    if (!ward) {
      return;
    }
    const since = new Date().toISOString();
    const token = await wardToken();
    const value = marker();
    const posted = await recordHeartRate(throughProxy(), E2E_WARD_ADDRESS, token, value);
    expect(posted.status).toBe(200);
    expect(posted.body).toEqual({ data: { ObservationCreate: expect.objectContaining({ id: expect.any(String), status: 'final' }) } });

    const stored = await storedWith(value);
    expect(stored).toHaveLength(1);
    expect(stored[0]?.meta?.author?.reference).toBe(`Device/${ward.resourceId}`);
    expect(stored[0]?.device?.identifier?.value).toBe(ward.id);

    const atWard = await auditsFrom(E2E_WARD_ADDRESS, since);
    expect(atWard.map((event) => [event.outcome, event.outcomeDesc])).toEqual([['0', 'Device token issued']]);
    expect(atWard[0]?.agent?.[0]?.who?.reference).toBe(`Device/${ward.resourceId}`);
  }, 60_000);
});
