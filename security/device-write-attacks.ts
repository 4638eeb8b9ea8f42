/**
 * Device writes into charts (OWASP API1, API3): project A's device, assigned to one of A's patients
 * (`Device.patient`), posting Observations through `/graphql` about another patient of A, a patient of B, a
 * patient that does not exist, something that is not a patient, with server-owned `meta` it may not set, and
 * through every other reference of an Observation that leads into a chart. Each must be a GraphQL `FORBIDDEN` with
 * nothing stored. Controls: the same device writes about its assigned patient, about itself and about no one.
 */
import { randomUUID } from 'node:crypto';
import type { Device, Encounter, Group, Location, Observation, Patient } from '@medplum/fhirtypes';
import type { SecurityContext } from './context.ts';
import type { AttackOutcome } from './suite.ts';

const KIND = 'device writes';
const CREATE = 'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id } }';

/** What one device write came to: its HTTP status, its GraphQL error codes, and the Observations it stored. */
interface WriteResult {
  readonly status: number;
  readonly codes: readonly string[];
  readonly stored: readonly Observation[];
}

/** Runs the device-write attacks with the suite's device token of project A; leaves its Device unassigned again. */
export async function deviceWriteAttacks(context: SecurityContext): Promise<void> {
  const { log, host, projectA, projectB, deviceTokenA } = context;
  const systemA = await host.standalone.host.getSystemRepo(projectA.projectId);
  const systemB = await host.standalone.host.getSystemRepo(projectB.projectId);
  const deviceId = entityIdOf(deviceTokenA);
  const device = await systemA.readResource<Device>('Device', deviceId);
  const identifier = device.identifier?.[0] ?? {};
  const assigned = `Patient/${projectA.ids['patient-in-care-team-1']}`;
  const unassigned = `Patient/${projectA.ids['patient-in-care-team-2']}`;
  const patientOfB = `Patient/${projectB.ids['patient-in-care-team-1']}`;
  const assign = async (patient: string | undefined): Promise<void> => {
    const current = await systemA.readResource<Device>('Device', deviceId);
    await systemA.updateResource<Device>({ ...current, patient: patient ? { reference: patient } : undefined });
  };

  // Records the attacks point at: another chart's encounter and Observation in A, and B's Observation.
  const encounterOfUnassigned = await systemA.createResource<Encounter>({ resourceType: 'Encounter', status: 'in-progress', class: { code: 'IMP' }, subject: { reference: unassigned } });
  const observationOfUnassigned = await systemA.createResource<Observation>({ resourceType: 'Observation', status: 'final', code: { text: 'Weight' }, subject: { reference: unassigned } });
  const observationOfB = await systemB.createResource<Observation>({ resourceType: 'Observation', status: 'final', code: { text: 'Weight' }, subject: { reference: patientOfB } });
  const group = await systemA.createResource<Group>({ resourceType: 'Group', type: 'person', actual: true, member: [{ entity: { reference: unassigned } }] });
  const location = await systemA.createResource<Location>({ resourceType: 'Location', name: 'Ward 3' });
  const deletedPatient = await systemA.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Gone' }] });
  await systemA.deleteResource('Patient', deletedPatient.id);

  const observation = (fields: Record<string, unknown>): Record<string, unknown> => ({
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    valueQuantity: { value: 72, unit: '/min' },
    device: { identifier: { system: identifier.system, value: identifier.value } },
    ...fields,
  });
  const write = async (input: Record<string, unknown>): Promise<WriteResult> => {
    const before = await observationIds(context);
    const response = await postWithinRateLimit(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${deviceTokenA}` },
      body: JSON.stringify({ query: CREATE, variables: { input } }),
    });
    const body = (await response.json()) as { errors?: { extensions?: { code?: string } }[] };
    const stored = (await storedObservations(context)).filter((item) => !before.has(item.id ?? ''));
    return { status: response.status, codes: (body.errors ?? []).map((error) => error.extensions?.code ?? ''), stored };
  };
  const refusedWrite = (result: WriteResult): AttackOutcome => {
    if (result.stored.length > 0) return { status: result.status, letThrough: true, note: `stored ${JSON.stringify(result.stored[0]).slice(0, 300)}` };
    if (result.codes.length !== 1 || result.codes[0] !== 'FORBIDDEN') return { status: result.status, letThrough: false, note: `expected FORBIDDEN, got ${result.codes.join(', ') || 'no error'}` };
    return { status: result.status, letThrough: false };
  };
  const attack = (name: string, input: Record<string, unknown>): Promise<AttackOutcome> => log.run(KIND, name, async () => refusedWrite(await write(observation(input))));
  const control = (name: string, input: Record<string, unknown>, subject: string | undefined): Promise<AttackOutcome> =>
    log.run(KIND, `control: ${name}`, async () => {
      const result = await write(observation(input));
      const kept = result.stored.length === 1 && result.stored[0].subject?.reference === subject && result.stored[0].meta?.author?.reference === `Device/${deviceId}`;
      return { status: result.status, letThrough: !kept, note: kept ? undefined : `the control was not stored as sent (${result.codes.join(', ')}): the refusals prove nothing` };
    });

  await assign(assigned);
  await control('an Observation about its assigned patient is stored', { subject: { reference: assigned } }, assigned);
  await control('an Observation about itself is stored', { subject: { reference: `Device/${deviceId}` } }, `Device/${deviceId}`);
  await control('an Observation about no one is stored', {}, undefined);

  await attack('subject: an unassigned patient of its own project', { subject: { reference: unassigned } });
  await attack('subject: a patient of another project', { subject: { reference: patientOfB } });
  await attack('subject: a patient that does not exist', { subject: { reference: `Patient/${randomUUID()}` } });
  await attack('subject: a deleted patient', { subject: { reference: `Patient/${deletedPatient.id}` } });
  await attack('subject: a Group of patients', { subject: { reference: `Group/${group.id}` } });
  await attack('subject: a Location', { subject: { reference: `Location/${location.id}` } });
  await attack('subject: another Device', { subject: { reference: `Device/${projectA.ids['demo-monitor']}` } });
  await attack('subject: the assigned patient by identifier, no reference', { subject: { identifier: { system: 'urn:mrn', value: '123' } } });
  await attack('subject: the assigned patient plus an identifier of another', { subject: { reference: assigned, identifier: { system: 'urn:mrn', value: '123' } } });
  await attack('subject: another patient as an absolute URL', { subject: { reference: `${host.url}fhir/R4/${unassigned}` } });
  await attack('subject: a conditional reference to a patient', { subject: { reference: 'Patient?name=Chen' } });
  await attack('meta.account set by the device', { subject: { reference: assigned }, meta: { account: { reference: unassigned } } });
  await attack('meta.accounts set by the device', { subject: { reference: assigned }, meta: { accounts: [{ reference: unassigned }] } });
  await attack('meta.author set by the device', { subject: { reference: assigned }, meta: { author: { reference: `Practitioner/${projectA.ids.practitioner}` } } });
  await attack('meta.project set by the device', { subject: { reference: assigned }, meta: { project: projectB.projectId } });
  await attack('meta.compartment set by the device', { subject: { reference: assigned }, meta: { compartment: [{ reference: unassigned }] } });
  await attack('performer: an unassigned patient (the patient compartment)', { subject: { reference: assigned }, performer: [{ reference: unassigned }] });
  await attack('focus: a patient of another project', { subject: { reference: assigned }, focus: [{ reference: patientOfB }] });
  await attack("encounter: an unassigned patient's encounter", { subject: { reference: assigned }, encounter: { reference: `Encounter/${encounterOfUnassigned.id}` } });
  await attack("derivedFrom: another project's Observation", { subject: { reference: assigned }, derivedFrom: [{ reference: `Observation/${observationOfB.id}` }] });
  await attack("hasMember: an unassigned patient's Observation", { subject: { reference: assigned }, hasMember: [{ reference: `Observation/${observationOfUnassigned.id}` }] });
  await attack('note: authored by an unassigned patient', { subject: { reference: assigned }, note: [{ authorReference: { reference: unassigned }, text: 'x' }] });
  await attack('extension: a reference to an unassigned patient', {
    subject: { reference: assigned },
    extension: [{ url: 'http://example.org/about', valueReference: { reference: unassigned } }],
  });

  // The operator moves the device to another patient: the same token writes about the new one only, at once.
  await assign(unassigned);
  await attack('subject: the previous patient, right after reassignment, same token', { subject: { reference: assigned } });
  await control('an Observation about the newly assigned patient is stored, same token', { subject: { reference: unassigned } }, unassigned);
  // An assignment that does not name a patient of the device's project gives the device no patient at all.
  await assign(patientOfB);
  await attack("subject: B's patient the Device.patient wrongly names", { subject: { reference: patientOfB } });
  await assign(`Patient/${deletedPatient.id}`);
  await attack('subject: the deleted patient the Device.patient names', { subject: { reference: `Patient/${deletedPatient.id}` } });
  await assign(undefined);
  await attack('subject: a patient, for a device with no patient', { subject: { reference: assigned } });
}

/**
 * The attacks must meet the write rules, not the device's rate limit (the key-guessing attacks before these use it
 * up): a 429 is waited out as its `Retry-After` says, a few times at most.
 */
async function postWithinRateLimit(url: string, init: RequestInit): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(url, init);
    if (response.status !== 429 || attempt === 4) return response;
    await response.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000));
  }
}

function entityIdOf(token: string): string {
  const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { entity_id?: unknown };
  if (typeof claims.entity_id !== 'string') throw new Error('the device token carries no entity_id');
  return claims.entity_id;
}

async function storedObservations(context: SecurityContext): Promise<Observation[]> {
  const bundle = await context.host.store.search<Observation>({ resourceType: 'Observation', count: 10_000 });
  return (bundle.entry ?? []).map((entry) => entry.resource as Observation);
}

async function observationIds(context: SecurityContext): Promise<Set<string>> {
  return new Set((await storedObservations(context)).map((item) => item.id ?? ''));
}
