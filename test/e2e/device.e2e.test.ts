/**
 * End to end, from the outside, on any server with fhirgate mounted (e2e-target.ts): a provisioned device
 * exchanges its key for a token, posts an Observation through `/graphql` with a GraphQL client (urql), is refused
 * an Observation that names another device, and the project administrator finds the Observation and the
 * exchange's AuditEvent with MedplumClient; assigned to a patient by the administrator (`Device.patient`), it writes
 * about that patient and is refused another one; a document naming anything beyond its Observations is refused
 * before the server runs it, and its mutations count against its rate limit, each one. Skipped, with a notice, when
 * the target has no device configured.
 */
import { Client, cacheExchange, fetchExchange } from '@urql/core';
import type { AuditEvent, Device, Observation, Patient } from '@medplum/fhirtypes';
import { CREATE_OBSERVATION, observationInput } from '../support/observation-mutation.ts';
import { connectE2eTarget, type E2eTarget } from './e2e-target.ts';

describe('fhirgate end to end: devices', () => {
  let target: E2eTarget;

  beforeAll(async () => {
    target = await connectE2eTarget();
    if (!target.device) {
      process.stderr.write('fhirgate e2e: no device_auth file given (--device-auth-file): the device checks are skipped\n');
    } else if (target.device.addedToFile) {
      // The server read its device_auth file when it started: a device added since is unknown to it.
      throw new Error(
        `fhirgate e2e: device ${target.device.id} was just added to ${process.env.E2E_DEVICE_AUTH_FILE}: restart the server (FHIRGATE_DEVICE_AUTH=${process.env.E2E_DEVICE_AUTH_FILE}) so it reads it, then run the suite again`
      );
    }
  }, 180_000);

  afterAll(async () => {
    await target?.close();
  });

  async function exchange(deviceId: string, apiKey: string): Promise<Response> {
    return fetch(`${target.baseUrl}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: deviceId, api_key: apiKey }),
    });
  }

  test('a device: its key for a token, an Observation through /graphql, another device refused, all on record', async () => {
    if (!target.device) {
      return;
    }
    const { device } = target;
    const wrong = await exchange(device.id, `${device.key}-wrong`);
    if (wrong.status === 503) {
      throw new Error(`The server has no device_auth configured: restart it with FHIRGATE_DEVICE_AUTH=${process.env.E2E_DEVICE_AUTH_FILE ?? 'the provisioned file'}`);
    }
    expect(wrong.status).toBe(403);

    const issued = await exchange(device.id, device.key);
    expect(issued.status).toBe(200);
    const { access, expires_in: expiresIn } = (await issued.json()) as { access: string; expires_in: number };
    expect(expiresIn).toBeGreaterThan(0);

    const graphql = new Client({
      url: `${target.baseUrl}graphql`,
      exchanges: [cacheExchange, fetchExchange],
      fetchOptions: { headers: { Authorization: `Bearer ${access}` } },
      preferGetMethod: false,
    });
    const posted = await graphql.mutation(CREATE_OBSERVATION, { input: observationInput(device.id, device.identifierSystem, 64) }).toPromise();
    expect(posted.error).toBeUndefined();
    const created = posted.data.ObservationCreate as { id: string; device: { identifier: { value: string } } };
    expect(created.device.identifier.value).toBe(device.id);

    const stored = await target.admin.readResource('Observation', created.id, { cache: 'no-cache' });
    expect(stored.valueQuantity?.value).toBe(64);
    expect(stored.meta?.author?.reference).toBe(`Device/${device.resourceId}`);

    const forged = await graphql.mutation(CREATE_OBSERVATION, { input: observationInput(`${device.id}-someone-else`, device.identifierSystem, 65) }).toPromise();
    expect(forged.data?.ObservationCreate ?? null).toBeNull();
    expect(forged.error?.graphQLErrors[0]?.extensions?.code).toBe('FORBIDDEN');
    const byDevice = await target.admin.searchResources('Observation', { device: `Device/${device.resourceId}`, _count: '100' }, { cache: 'no-cache' });
    expect(byDevice.filter((observation: Observation) => observation.valueQuantity?.value === 65)).toEqual([]);

    const audits = (await target.admin.searchResources('AuditEvent', { entity: `Device/${device.resourceId}`, _count: '100' }, { cache: 'no-cache' })) as AuditEvent[];
    expect(audits.some((event) => event.outcome === '0' && event.outcomeDesc === 'Device token issued')).toBe(true);
  }, 60_000);

  test('a device assigned to a patient writes about that patient; another patient and meta.account are refused', async () => {
    if (!target.device) {
      return;
    }
    const { device, admin } = target;
    const run = Date.now().toString(36);
    const assigned = await admin.createResource<Patient>({ resourceType: 'Patient', name: [{ given: ['Ada'], family: `E2e-${run}` }] });
    const unassigned = await admin.createResource<Patient>({ resourceType: 'Patient', name: [{ given: ['Bo'], family: `E2e-${run}` }] });
    const current = await admin.readResource('Device', device.resourceId, { cache: 'no-cache' });
    // The device may be one the operator provisioned (the first in the device_auth file): its assignment is put back.
    await admin.updateResource<Device>({ ...current, patient: { reference: `Patient/${assigned.id}` } });
    try {
      const { access } = (await (await exchange(device.id, device.key)).json()) as { access: string };
      const graphql = new Client({ url: `${target.baseUrl}graphql`, exchanges: [fetchExchange], fetchOptions: { headers: { Authorization: `Bearer ${access}` } }, preferGetMethod: false });
      const write = (fields: Record<string, unknown>) =>
        graphql.mutation(CREATE_OBSERVATION, { input: { ...observationInput(device.id, device.identifierSystem, 66), ...fields } }).toPromise();

      const posted = await write({ subject: { reference: `Patient/${assigned.id}` } });
      expect(posted.error).toBeUndefined();
      const stored = await admin.readResource('Observation', posted.data.ObservationCreate.id as string, { cache: 'no-cache' });
      expect(stored.subject?.reference).toBe(`Patient/${assigned.id}`);

      for (const fields of [{ subject: { reference: `Patient/${unassigned.id}` } }, { subject: { reference: `Patient/${assigned.id}` }, meta: { account: { reference: `Patient/${unassigned.id}` } } }]) {
        const refused = await write(fields);
        expect(refused.error?.graphQLErrors[0]?.extensions?.code).toBe('FORBIDDEN');
      }
      const aboutUnassigned = await admin.searchResources('Observation', { subject: `Patient/${unassigned.id}` }, { cache: 'no-cache' });
      expect(aboutUnassigned).toHaveLength(0);
      const aboutAssigned = await admin.searchResources('Observation', { subject: `Patient/${assigned.id}` }, { cache: 'no-cache' });
      expect(aboutAssigned.map((observation: Observation) => observation.id)).toEqual([posted.data.ObservationCreate.id]);
    } finally {
      const { patient: _assignedForTheTest, ...latest } = await admin.readResource('Device', device.resourceId, { cache: 'no-cache' });
      await admin.updateResource<Device>(current.patient ? { ...latest, patient: current.patient } : latest);
    }
  }, 60_000);

  test("a device's document beyond its Observations is refused, and each of a document's mutations counts against its rate limit", async () => {
    if (!target.device) {
      return;
    }
    const { device, admin } = target;
    const { access } = (await (await exchange(device.id, device.key)).json()) as { access: string };
    const post = async (query: string, variables?: Record<string, unknown>): Promise<{ status: number; body: { data?: Record<string, unknown> | null; errors?: { extensions?: { code?: string } }[] } }> => {
      const response = await fetch(`${target.baseUrl}graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${access}` },
        body: JSON.stringify({ query, variables }),
      });
      return { status: response.status, body: (await response.json()) as { data?: Record<string, unknown> | null; errors?: { extensions?: { code?: string } }[] } };
    };

    // Another type's list: refused from the document alone (inside a Medplum server, before its whole schema is needed).
    const patients = await post('{ PatientList { id } }');
    expect(patients.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(patients.body.data ?? null).toBeNull();

    // One more create than a second allows, aliased in one document: refused outright, none of them stored.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const marker = 6000 + Math.floor(Math.random() * 1000);
    const creates = Array.from({ length: device.perSecond + 1 }, (_, index) => `w${index}: ObservationCreate(resource: $input) { id }`).join(' ');
    const flood = await post(`mutation ($input: ObservationInput!) { ${creates} }`, { input: observationInput(device.id, device.identifierSystem, marker) });
    expect(flood.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    const stored = await admin.searchResources('Observation', { device: `Device/${device.resourceId}`, _count: '1000' }, { cache: 'no-cache' });
    expect(stored.filter((observation: Observation) => observation.valueQuantity?.value === marker)).toEqual([]);
  }, 60_000);
});
