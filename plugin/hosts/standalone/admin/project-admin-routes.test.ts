/**
 * Medplum's project admin API and email and password sign-in on the standalone host, driven by MedplumClient as
 * against a Medplum server: an administrator invites a practitioner with a password and a policy, the practitioner
 * signs in with `startLogin` + `processCode`, and the policy applies to what they read.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { MedplumClient, type WithId } from '@medplum/core';
import type { AccessPolicy, Patient, Project, ProjectMembership } from '@medplum/fhirtypes';
import type { SeededProject } from '../seed.ts';
import { ensureAdminClient } from '../admin-client.ts';
import { signInWithPassword } from '../../../../test/support/password-sign-in.ts';
import { startTestHost, type TestHost } from '../../../../test/support/test-host.ts';

describe('project admin API and password sign-in on the standalone host', () => {
  let host: TestHost;
  let project: SeededProject;
  let admin: MedplumClient;
  let carePatient: WithId<Patient>;
  let otherPatient: WithId<Patient>;
  let policy: WithId<AccessPolicy>;

  beforeAll(async () => {
    host = await startTestHost();
    project = await host.seedProject();
    const credentials = await adminClientOf(project.projectId);
    admin = new MedplumClient({ baseUrl: host.url, fetch });
    await admin.startClientLogin(credentials.id, credentials.secret);
    carePatient = await admin.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Care' }] });
    otherPatient = await admin.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Other' }] });
    policy = await admin.createResource<AccessPolicy>({
      resourceType: 'AccessPolicy',
      name: 'one patient',
      resource: [{ resourceType: 'Patient', criteria: 'Patient?_id=%patient.id', readonly: true }],
    });
  });

  afterAll(() => host.close());

  /** The administrator client of a seeded (fresh-id) project, made as `--admin-client` makes the demo's. */
  async function adminClientOf(projectId: string): Promise<{ id: string; secret: string }> {
    return ensureAdminClient(host.store, projectId, { clientId: randomUUID(), membershipId: randomUUID() });
  }

  async function invite(email: string, password?: string): Promise<WithId<ProjectMembership>> {
    return (await admin.invite(project.projectId, {
      resourceType: 'Practitioner',
      firstName: 'Ines',
      lastName: 'Invited',
      email,
      password,
      sendEmail: false,
      membership: {
        access: [{ policy: { reference: `AccessPolicy/${policy.id}` }, parameter: [{ name: 'patient', valueReference: { reference: `Patient/${carePatient.id}` } }] }],
      },
    })) as WithId<ProjectMembership>;
  }

  test('an invited practitioner signs in with email and password, and reads what the policy allows', async () => {
    const email = `ines.${randomBytes(4).toString('hex')}@Example.com`;
    const password = randomBytes(12).toString('base64url');
    const membership = await invite(email, password);

    const practitioner = await signInWithPassword(host.url, { email: email.toLowerCase(), password, projectId: project.projectId });
    expect(practitioner.getProfile()?.resourceType).toBe('Practitioner');
    expect(`Practitioner/${practitioner.getProfile()?.id}`).toBe(membership.profile.reference);
    expect((await practitioner.readResource('Patient', carePatient.id)).id).toBe(carePatient.id);
    await expect(practitioner.readResource('Patient', otherPatient.id)).rejects.toThrow(/Not found/);

    const me = (await practitioner.get('auth/me')) as { user?: Record<string, unknown> };
    expect(me.user?.email).toBe(email.toLowerCase());
    expect(me.user).not.toHaveProperty('passwordHash');
  });

  test('a code serves once, only with its verifier; a wrong password and an unknown email get one answer', async () => {
    const email = `olga.${randomBytes(4).toString('hex')}@example.com`;
    const password = randomBytes(12).toString('base64url');
    await invite(email, password);
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const started = await post('auth/login', { email, password, codeChallenge: challenge, codeChallengeMethod: 'S256', projectId: project.projectId });
    const { code } = (await started.json()) as { code: string };

    expect((await token({ grant_type: 'authorization_code', code, code_verifier: 'not-the-verifier' })).status).toBe(400);
    const granted = await token({ grant_type: 'authorization_code', code, code_verifier: verifier });
    expect(granted.status).toBe(200);
    expect(await granted.json()).toMatchObject({ token_type: 'Bearer', access_token: expect.any(String), profile: { reference: expect.stringMatching(/^Practitioner\//) } });
    const again = await token({ grant_type: 'authorization_code', code, code_verifier: verifier });
    expect(again.status).toBe(400);
    expect(await again.json()).toMatchObject({ error: 'invalid_grant' });

    const wrongPassword = await post('auth/login', { email, password: `${password}x`, codeChallenge: challenge, codeChallengeMethod: 'S256' });
    const unknownEmail = await post('auth/login', { email: `nobody.${email}`, password, codeChallenge: challenge, codeChallengeMethod: 'S256' });
    expect(wrongPassword.status).toBe(400);
    expect(await wrongPassword.json()).toEqual(await unknownEmail.json());
  });

  test('an email already in the project is a 409; settings and secrets replace the Project’s', async () => {
    const email = `paul.${randomBytes(4).toString('hex')}@example.com`;
    await invite(email, randomBytes(12).toString('base64url'));
    await expect(invite(email)).rejects.toThrow(/already a member/);

    await admin.post(`admin/projects/${project.projectId}/settings`, [{ name: 'AI_MODEL', valueString: 'openai/gpt-4o-mini' }]);
    await admin.post(`admin/projects/${project.projectId}/secrets`, [{ name: 'AI_API_KEY', valueString: 'sk-project' }]);
    const { project: read } = (await admin.get(`admin/projects/${project.projectId}`, { cache: 'no-cache' })) as { project: Project };
    expect(read.setting).toEqual([{ name: 'AI_MODEL', valueString: 'openai/gpt-4o-mini' }]);
    expect(read.secret).toEqual([{ name: 'AI_API_KEY', valueString: 'sk-project' }]);
  });

  test('only the project’s administrators: another member 403, no token 401, a bad body 400', async () => {
    const practitionerToken = await host.accessTokenFor(project.ids['practitioner-membership']);
    const asPractitioner = await fetch(`${host.url}admin/projects/${project.projectId}`, { headers: { Authorization: `Bearer ${practitionerToken}` } });
    expect(asPractitioner.status).toBe(403);
    expect((await fetch(`${host.url}admin/projects/${project.projectId}`)).status).toBe(401);
    const malformed = await fetch(`${host.url}admin/projects/${project.projectId}/invite`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${admin.getAccessToken()}`, 'Content-Type': 'application/json' },
      body: '{"resourceType": ',
    });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { resourceType: string }).resourceType).toBe('OperationOutcome');
    await expect(admin.invite(project.projectId, { resourceType: 'Practitioner', firstName: 'A', lastName: 'B', unknownField: true } as never)).rejects.toThrow(/unknownField/);
  });

  function post(path: string, body: unknown): Promise<Response> {
    return fetch(`${host.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  }

  function token(form: Record<string, string>): Promise<Response> {
    return fetch(`${host.url}oauth2/token`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
  }
});
