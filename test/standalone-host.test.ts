/**
 * The standalone host behaves like a Medplum server where clients can tell: MedplumClient logs in and uses the
 * FHIR API, AccessPolicies decide, data survives a restart, and only valid tokens of live logins get in.
 */
import { MedplumClient, Operator, createReference } from '@medplum/core';
import type {
  Bundle,
  Communication,
  Login,
  Observation,
  OperationOutcome,
  Patient,
  Practitioner,
  Project,
  ProjectMembership,
  Resource,
} from '@medplum/fhirtypes';
import { SignJWT, decodeJwt, decodeProtectedHeader, generateKeyPair } from 'jose';
import { startTestHost, TEST_ISSUER, type TestHost } from './support/test-host.ts';
import { DEFAULT_CATEGORY_SYSTEM } from '../plugin/chat/fhir-vocabulary.ts';

async function fhirFetch(host: TestHost, token: string | undefined, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${host.url}fhir/R4/${path}`, {
    ...init,
    headers: { 'Content-Type': 'application/fhir+json', ...(token ? { Authorization: `Bearer ${token}` } : {}), ...init.headers },
  });
}

describe('standalone host', () => {
  let host: TestHost;

  beforeEach(async () => {
    host = await startTestHost();
  });

  afterEach(async () => {
    await host.close();
  });

  test('MedplumClient logs in with client credentials, then creates, reads and searches', async () => {
    const project = await host.seedProject();
    const medplum = new MedplumClient({ baseUrl: host.url, fetch });
    const profile = await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');

    expect(profile.resourceType).toBe('ClientApplication');
    expect(medplum.getProject()?.id).toBe(project.projectId);
    expect(JSON.stringify(medplum.getProfile())).not.toContain(project.client?.secret);

    const patient = await medplum.readResource('Patient', project.ids['patient-in-care-team-1']);
    const created = await medplum.createResource<Observation>({
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
      subject: createReference(patient),
      valueQuantity: { value: 72, unit: 'beats/minute' },
    });
    expect(created.meta?.project).toBe(project.projectId);
    expect(created.meta?.author?.reference).toBe(`ClientApplication/${project.client?.id}`);

    const read = await medplum.readResource('Observation', created.id);
    expect(read.valueQuantity?.value).toBe(72);

    const found = await medplum.searchResources('Observation', { code: 'http://loinc.org|8867-4', subject: `Patient/${patient.id}` });
    expect(found.map((observation) => observation.id)).toEqual([created.id]);
  });

  test('an AccessPolicy denial is a 403 OperationOutcome and stores nothing', async () => {
    const project = await host.seedProject();
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const outsider = `Patient/${project.ids['patient-outside-care-team']}`;
    const insider = `Patient/${project.ids['patient-in-care-team-1']}`;
    // The ready-made policy lets a practitioner create prompts (category ai-prompt) about the patient, nothing else.
    const communication = (subject: string): Communication => ({
      resourceType: 'Communication',
      status: 'completed',
      category: [{ coding: [{ system: DEFAULT_CATEGORY_SYSTEM, code: 'ai-prompt' }] }],
      subject: { reference: subject },
      payload: [{ contentString: 'note' }],
    });

    const denied = await fhirFetch(host, token, 'Communication', { method: 'POST', body: JSON.stringify(communication(outsider)) });
    expect(denied.status).toBe(403);
    expect(((await denied.json()) as OperationOutcome).resourceType).toBe('OperationOutcome');
    const deniedType = await fhirFetch(host, token, 'Observation', {
      method: 'POST',
      body: JSON.stringify({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: insider } }),
    });
    expect(deniedType.status).toBe(403);

    const allowed = await fhirFetch(host, token, 'Communication', { method: 'POST', body: JSON.stringify(communication(insider)) });
    expect(allowed.status).toBe(201);

    const stored = await host.store.searchResources<Communication>({
      resourceType: 'Communication',
      filters: [{ code: '_project', operator: Operator.EQUALS, value: project.projectId }],
    });
    expect(stored.map((item) => item.subject?.reference)).toEqual([insider]);
    const observations = await host.store.searchResources<Observation>({
      resourceType: 'Observation',
      filters: [{ code: '_project', operator: Operator.EQUALS, value: project.projectId }],
    });
    expect(observations).toHaveLength(0);

    const outsiderRead = await fhirFetch(host, token, `Patient/${project.ids['patient-outside-care-team']}`);
    expect(outsiderRead.status).toBe(404);
    const visiblePatients = (await (await fhirFetch(host, token, 'Patient')).json()) as Bundle<Patient>;
    expect(visiblePatients.entry?.map((entry) => entry.resource?.id).sort()).toEqual(
      [project.ids['patient-in-care-team-1'], project.ids['patient-in-care-team-2']].sort()
    );
  });

  test('a user of one project cannot reach another project', async () => {
    const mine = await host.seedProject();
    const theirs = await host.seedProject();
    const token = await host.accessTokenFor(mine.ids['client-membership']);
    expect((await fhirFetch(host, token, `Patient/${theirs.ids['patient-in-care-team-1']}`)).status).toBe(404);
    const bundle = (await (await fhirFetch(host, token, 'Patient')).json()) as Bundle<Patient>;
    expect(bundle.entry?.length).toBeGreaterThan(0);
    expect(bundle.entry?.every((entry) => entry.resource?.meta?.project === mine.projectId)).toBe(true);
  });

  test('data and tokens survive a restart on the same SQLite file', async () => {
    const project = await host.seedProject();
    const token = await host.accessTokenFor(project.ids['client-membership']);
    const created = await fhirFetch(host, token, 'Patient', {
      method: 'POST',
      body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Persisted' }] }),
    });
    const patient = (await created.json()) as Patient;
    const { dataDir } = host;
    await host.close({ keepData: true });

    host = await startTestHost({ dataDir });
    const read = await fhirFetch(host, token, `Patient/${patient.id}`);
    expect(read.status).toBe(200);
    expect(((await read.json()) as Patient).name?.[0]?.family).toBe('Persisted');
  });

  test('idle connections stay open past a client\'s own keep-alive limit, so a client never sends on a closed one', async () => {
    const response = await fetch(`${host.url}healthcheck`);
    await response.arrayBuffer();
    // Clients close their side after the server's timeout less a margin (undici: 2 s); Node's 5 s default raced them.
    expect(response.headers.get('keep-alive')).toBe('timeout=65');
  });

  test('/auth/me describes the session without secrets', async () => {
    const project = await host.seedProject();
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const response = await fetch(`${host.url}auth/me`, { headers: { Authorization: `Bearer ${token}` } });
    const session = (await response.json()) as { profile: Practitioner; project: Project; membership: ProjectMembership; config: Resource };
    expect(response.status).toBe(200);
    expect(session.profile).toMatchObject({ resourceType: 'Practitioner', id: project.ids.practitioner });
    expect(session.project.id).toBe(project.projectId);
    expect(session.membership.id).toBe(project.ids['practitioner-membership']);
    expect(session.config.resourceType).toBe('UserConfiguration');
  });

  describe('rejects credentials that are not a valid token of a live login', () => {
    test('missing, malformed, or badly signed tokens are 401', async () => {
      const project = await host.seedProject();
      const token = await host.accessTokenFor(project.ids['client-membership']);
      const [header, payload, signature] = token.split('.');
      const flipped = `${signature.slice(0, -4)}${signature.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
      const tamperedPayload = Buffer.from(JSON.stringify({ ...decodeJwt(token), profile: 'Practitioner/someone' })).toString('base64url');

      expect((await fhirFetch(host, undefined, 'Patient')).status).toBe(401);
      expect((await fhirFetch(host, 'not-a-jwt', 'Patient')).status).toBe(401);
      expect((await fhirFetch(host, `${header}.${payload}.${flipped}`, 'Patient')).status).toBe(401);
      expect((await fhirFetch(host, `${header}.${tamperedPayload}.${signature}`, 'Patient')).status).toBe(401);
      expect((await fhirFetch(host, token, 'Patient')).status).toBe(200);
    });

    test('a token signed by another key under the same key id is 401', async () => {
      const project = await host.seedProject();
      const token = await host.accessTokenFor(project.ids['client-membership']);
      const { privateKey } = await generateKeyPair('RS256');
      const forged = await new SignJWT(decodeJwt(token))
        .setProtectedHeader({ alg: 'RS256', kid: decodeProtectedHeader(token).kid, typ: 'JWT' })
        .sign(privateKey);
      expect((await fhirFetch(host, forged, 'Patient')).status).toBe(401);
    });

    test('an expired token is 401', async () => {
      await host.close();
      host = await startTestHost({ accessTokenLifetimeSeconds: 1 });
      const project = await host.seedProject();
      const token = await host.accessTokenFor(project.ids['client-membership']);
      expect((await fhirFetch(host, token, 'Patient')).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 2100));
      expect((await fhirFetch(host, token, 'Patient')).status).toBe(401);
    });

    test('a token of a revoked login is 401', async () => {
      const project = await host.seedProject();
      const token = await host.accessTokenFor(project.ids['client-membership']);
      const login = await host.store.readResource<Login>('Login', decodeJwt(token).login_id as string);
      await host.store.updateResource<Login>({ ...login, revoked: true });
      expect((await fhirFetch(host, token, 'Patient')).status).toBe(401);
    });

    test('a token from another issuer is 401, though signed with the same keys', async () => {
      const project = await host.seedProject();
      const token = await host.accessTokenFor(project.ids['client-membership']);
      expect(decodeJwt(token).iss).toBe(TEST_ISSUER);
      const elsewhere = await startTestHost({ dataDir: host.dataDir, issuer: 'https://fhir.other-clinic.example/' });
      try {
        expect((await fhirFetch(elsewhere, token, 'Patient')).status).toBe(401);
      } finally {
        await elsewhere.close({ keepData: true });
      }
    });
  });
});
