/**
 * Which charts a device writes into, end to end: an operator assigns a Device to a patient (`Device.patient`) with
 * any FHIR client; the device posts Observations through `/graphql` with a real GraphQL client (urql); the project's
 * integration reads back what was stored with MedplumClient. A device writes about its assigned patient, itself or
 * no one; anything else is a GraphQL `FORBIDDEN` that stores nothing, and a reassignment applies to the device's
 * next request, with the token it already holds.
 */
import { Client, fetchExchange, gql, type CombinedError, type OperationResult } from '@urql/core';
import { MedplumClient } from '@medplum/core';
import type { Device, Encounter, Observation, Patient } from '@medplum/fhirtypes';
import { CREATE_OBSERVATION, observationInput } from './support/observation-mutation.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';

const SYSTEM = 'urn:example:devices';
const DEVICE_ID = 'bedside-1';
const DEVICE_KEY = 'key-bedside-1-7f3c9a61d2e84b05a6c1';

describe('a device writes only about the patient it is assigned to', () => {
  let host: TestHost;
  let project: SeededProject;
  let other: SeededProject;
  let medplum: MedplumClient;
  let bedside: Device;
  let maria: string;
  let james: string;

  beforeAll(async () => {
    host = await startTestHost({
      pluginFor: (seeded) => ({
        device_auth: { valid_keys: { [DEVICE_ID]: DEVICE_KEY }, jwt_secret: 'assignment-test-device-signing-secret-0123456789', identifier_system: SYSTEM, project_id: seeded.projectId, rate_limit_per_second: 1000 },
      }),
    });
    project = host.project as SeededProject;
    other = await host.seedProject();
    maria = `Patient/${project.ids['patient-in-care-team-1']}`;
    james = `Patient/${project.ids['patient-in-care-team-2']}`;
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
    // The operator's side: an ordinary FHIR write of the Device, here by the project's integration.
    bedside = await (await host.standalone.host.getSystemRepo(project.projectId)).createResource<Device>({
      resourceType: 'Device',
      status: 'active',
      identifier: [{ system: SYSTEM, value: DEVICE_ID }],
      patient: { reference: maria },
    });
  });

  afterAll(async () => {
    await host.close();
  });

  async function deviceClient(): Promise<Client> {
    const response = await fetch(`${host.url}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: DEVICE_ID, api_key: DEVICE_KEY }),
    });
    const { access } = (await response.json()) as { access: string };
    return new Client({ url: `${host.url}graphql`, exchanges: [fetchExchange], preferGetMethod: false, requestPolicy: 'network-only', fetchOptions: { headers: { Authorization: `Bearer ${access}` } } });
  }

  async function assign(patient: string | undefined): Promise<void> {
    const current = await medplum.readResource('Device', bedside.id ?? '', { cache: 'no-cache' });
    await host.standalone.host.getSystemRepo(project.projectId).then((repo) => repo.updateResource<Device>({ ...current, patient: patient ? { reference: patient } : undefined }));
  }

  async function write(client: Client, fields: Record<string, unknown>): Promise<OperationResult> {
    return client.mutation(CREATE_OBSERVATION, { input: { ...observationInput(DEVICE_ID, SYSTEM, 70), ...fields } }).toPromise();
  }

  async function observationCount(): Promise<number> {
    return (await host.store.search({ resourceType: 'Observation', total: 'accurate', count: 0 })).total ?? 0;
  }

  function refusal(error: CombinedError | undefined): { code: unknown; message: string | undefined } {
    return { code: error?.graphQLErrors[0]?.extensions?.code, message: error?.graphQLErrors[0]?.message };
  }

  test("an Observation about its assigned patient is stored in that patient's chart, authored by the device", async () => {
    await assign(maria);
    const result = await write(await deviceClient(), { subject: { reference: maria } });

    expect(result.error).toBeUndefined();
    const inChart = await medplum.searchResources('Observation', { subject: maria, device: `Device/${bedside.id}` }, { cache: 'no-cache' });
    const stored = inChart.find((observation: Observation) => observation.id === result.data.ObservationCreate.id);
    expect(stored?.subject).toEqual({ reference: maria });
    expect(stored?.meta?.author).toEqual({ reference: `Device/${bedside.id}` });
  });

  test('an Observation about the device itself, or about no one, is stored too', async () => {
    const client = await deviceClient();
    expect((await write(client, { subject: { reference: `Device/${bedside.id}` } })).error).toBeUndefined();
    expect((await write(client, {})).error).toBeUndefined();
  });

  test.each([
    ['another patient of its project', () => ({ subject: { reference: james } })],
    ['a patient of another project', () => ({ subject: { reference: `Patient/${other.ids['patient-in-care-team-1']}` } })],
    ['a patient that does not exist', () => ({ subject: { reference: 'Patient/00000000-0000-4000-8000-000000000000' } })],
    ['a Group', () => ({ subject: { reference: 'Group/00000000-0000-4000-8000-000000000000' } })],
  ])('an Observation about %s is FORBIDDEN, saying what the device may write about, and nothing is stored', async (_name, fields) => {
    await assign(maria);
    const before = await observationCount();

    const result = await write(await deviceClient(), fields());

    expect(result.data?.ObservationCreate ?? null).toBeNull();
    expect(refusal(result.error)).toEqual({
      code: 'FORBIDDEN',
      message: `ObservationCreate: subject must be the patient this device is assigned to (its Device.patient), the device itself (Device/${bedside.id}), or absent.`,
    });
    expect(await observationCount()).toBe(before);
  });

  test.each([
    ['meta.account', { meta: { account: { reference: 'Organization/00000000-0000-4000-8000-000000000000' } } }, /may not set meta\.account;/],
    ['meta.author', { meta: { author: { reference: 'Practitioner/00000000-0000-4000-8000-000000000000' } } }, /may not set meta\.author;/],
    ['meta.project', { meta: { project: '00000000-0000-4000-8000-000000000000' } }, /may not set meta\.project;/],
    ['a performer (the patient compartment)', { performer: [{ reference: 'Patient/00000000-0000-4000-8000-000000000000' }] }, /may not set performer;/],
    ['a focus', { focus: [{ reference: 'Patient/00000000-0000-4000-8000-000000000000' }] }, /may not set focus;/],
    ['a note by a patient', { note: [{ text: 'x', authorReference: { reference: 'Patient/00000000-0000-4000-8000-000000000000' } }] }, /note\[0\]\.authorReference is a reference/],
  ])('%s set by the device is FORBIDDEN by name and nothing is stored', async (_name, fields, message) => {
    await assign(maria);
    const before = await observationCount();

    const result = await write(await deviceClient(), { subject: { reference: maria }, ...fields });

    expect(refusal(result.error)).toEqual({ code: 'FORBIDDEN', message: expect.stringMatching(message) });
    expect(await observationCount()).toBe(before);
  });

  // A device never names an encounter: not even its own patient's stay, which a check of the stay's patient would let through.
  test.each([
    ["the assigned patient's own stay", () => maria],
    ["another patient's stay", () => james],
  ])('an encounter of %s is FORBIDDEN by name, and nothing is stored', async (_name, patientOfStay) => {
    await assign(maria);
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    const stay = await repo.createResource<Encounter>({ resourceType: 'Encounter', status: 'in-progress', class: { code: 'IMP' }, subject: { reference: patientOfStay() } });
    const before = await observationCount();

    const result = await write(await deviceClient(), { subject: { reference: maria }, encounter: { reference: `Encounter/${stay.id}` } });

    expect(result.data?.ObservationCreate ?? null).toBeNull();
    expect(refusal(result.error)).toEqual({ code: 'FORBIDDEN', message: 'ObservationCreate: a device may not set encounter; its Observations refer only to their device and their subject.' });
    expect(await observationCount()).toBe(before);
  });

  test('a reassignment applies to the next request with the same token: writes and reads follow the new patient', async () => {
    await assign(maria);
    const client = await deviceClient();
    const aboutMaria = await write(client, { subject: { reference: maria } });
    expect(aboutMaria.error).toBeUndefined();

    await assign(james);

    expect(refusal((await write(client, { subject: { reference: maria } })).error).code).toBe('FORBIDDEN');
    expect((await write(client, { subject: { reference: james } })).error).toBeUndefined();
    const read = await client.query(gql`query ($id: ID!) { Observation(id: $id) { id } }`, { id: aboutMaria.data.ObservationCreate.id }).toPromise();
    expect(read.data?.Observation ?? null).toBeNull();
    const listed = await client.query(gql`{ ObservationList(_count: 1000) { subject { reference } } }`, {}).toPromise();
    expect(listed.data.ObservationList.map((observation: Observation) => observation.subject?.reference)).not.toContain(maria);
    // A token issued after the change behaves the same.
    expect(refusal((await write(await deviceClient(), { subject: { reference: maria } })).error).code).toBe('FORBIDDEN');
  });

  test.each([
    ['no patient', () => undefined],
    ['a patient of another project', () => `Patient/${other.ids['patient-in-care-team-1']}`],
    ['a patient that was deleted', async () => {
      const repo = await host.standalone.host.getSystemRepo(project.projectId);
      const gone = await repo.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Gone' }] });
      await repo.deleteResource('Patient', gone.id);
      return `Patient/${gone.id}`;
    }],
  ])('a Device whose Device.patient names %s writes about itself or no one, never about that patient', async (_name, patientOf) => {
    const patient = await patientOf();
    await assign(patient);
    const client = await deviceClient();

    const refused = await write(client, { subject: { reference: patient ?? maria } });
    expect(refusal(refused.error)).toEqual({
      code: 'FORBIDDEN',
      message: `ObservationCreate: this device is assigned to no patient of its project (Device.patient), so subject must be the device itself (Device/${bedside.id}) or absent.`,
    });
    expect((await write(client, { subject: { reference: `Device/${bedside.id}` } })).error).toBeUndefined();
    expect((await write(client, {})).error).toBeUndefined();
  });
});
