/**
 * A browser application on another origin against `npm start`'s host, as docs/configuration.md says: with its origin
 * in `FHIRGATE_ALLOWED_ORIGINS`, it reads the CapabilityStatement and signs a user in with the exchanges
 * `@medplum/react`'s `SignInForm` makes (`POST /auth/method`, `POST /auth/login` with an S256 PKCE challenge,
 * `POST /oauth2/token`, `GET /auth/me`), each through a fetch that behaves as the browser's (preflights, and answers
 * without CORS headers kept from the page), with MedplumClient itself. A page of an origin not listed gets nothing.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ClientStorage, MedplumClient } from '@medplum/core';
import type { CapabilityStatement, ProjectMembership } from '@medplum/fhirtypes';
import { browserFetch } from './support/browser-fetch.ts';
import { startHostProcess, type HostProcess } from './support/host-process.ts';
import { usersShell } from './support/users-shell.ts';

const run = promisify(execFile);

const APP_ORIGIN = 'http://localhost:3000';
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const OWN_CONVERSATIONS_POLICY = 'AccessPolicy/a1f0c0de-0000-4000-8000-000000000102';
const EMAIL = 'nina.novak@example.org';
const PASSWORD = 'correct horse battery staple';

describe('a browser application of an allowed origin signs in as SignInForm does', () => {
  let dataDir: string;
  let host: HostProcess;
  let profileReference: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-browser-'));
    host = await startHostProcess({ FHIRGATE_DATA_DIR: dataDir, FHIRGATE_ALLOWED_ORIGINS: APP_ORIGIN });
    // The project's administrator invites a practitioner with a password (Medplum's invite, the demo's administrator).
    const { stdout } = await run('npm', ['run', '-s', 'token', '--', '--admin'], { env: { ...usersShell(), FHIRGATE_DATA_DIR: dataDir } });
    const invited = await fetch(`${host.url}admin/projects/${DEMO_PROJECT}/invite`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${stdout.trim()}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ resourceType: 'Practitioner', firstName: 'Nina', lastName: 'Novak', email: EMAIL, password: PASSWORD, membership: { accessPolicy: { reference: OWN_CONVERSATIONS_POLICY } } }),
    });
    expect(invited.status).toBe(200);
    profileReference = ((await invited.json()) as ProjectMembership).profile.reference ?? '';
  }, 120_000);

  afterAll(async () => {
    host.child.kill('SIGTERM');
    await new Promise((resolve) => host.child.once('exit', resolve));
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A page's MedplumClient, with the verifier of an S256 challenge in its storage, as a browser's makes one. */
  function pageClient(origin: string, log: string[] = []): { medplum: MedplumClient; challenge: { codeChallenge: string; codeChallengeMethod: 'S256' } } {
    const verifier = randomBytes(48).toString('base64url');
    const storage = new ClientStorage();
    storage.setString('codeVerifier', verifier);
    const medplum = new MedplumClient({ baseUrl: host.url, fetch: browserFetch(origin, log), storage });
    return { medplum, challenge: { codeChallenge: createHash('sha256').update(verifier).digest('base64url'), codeChallengeMethod: 'S256' } };
  }

  test('the CapabilityStatement is read without a token: FHIR R4, CORS, the token URL', async () => {
    const { medplum } = pageClient(APP_ORIGIN);
    const statement = await medplum.get<CapabilityStatement>('fhir/R4/metadata');
    expect(statement).toMatchObject({ resourceType: 'CapabilityStatement', status: 'active', kind: 'instance', fhirVersion: '4.0.1', format: ['json'] });
    const rest = statement.rest?.[0];
    expect(rest?.security?.cors).toBe(true);
    expect(rest?.security?.extension?.[0]?.extension).toContainEqual({ url: 'token', valueUri: expect.stringMatching(/\/oauth2\/token$/) });
    expect(rest?.resource?.find((resource) => resource.type === 'Observation')?.interaction?.map((interaction) => interaction.code)).toEqual(
      expect.arrayContaining(['read', 'create', 'search-type'])
    );
  });

  test('auth/method, auth/login with PKCE, oauth2/token and auth/me, then FHIR reads as the signed-in user', async () => {
    const log: string[] = [];
    const { medplum, challenge } = pageClient(APP_ORIGIN, log);
    // SignInForm's first step: does the email's domain sign in elsewhere? Here never: `{}`, go on with the password.
    expect(await medplum.post('auth/method', { email: EMAIL })).toEqual({});
    const login = await medplum.startLogin({ email: EMAIL, password: PASSWORD, remember: false, projectId: DEMO_PROJECT, ...challenge });
    expect(login.code).toEqual(expect.any(String));
    await medplum.processCode(login.code ?? '');

    expect(`Practitioner/${medplum.getProfile()?.id}`).toBe(profileReference);
    expect(medplum.getProject()?.id).toBe(DEMO_PROJECT);
    const practitioners = await medplum.searchResources('Practitioner');
    expect(practitioners.map((practitioner) => `Practitioner/${practitioner.id}`)).toEqual([profileReference]);
    // Each exchange went through the browser's rules: JSON bodies and the bearer token after a preflight.
    expect(log).toEqual(
      expect.arrayContaining(['OPTIONS /auth/method', 'POST /auth/method', 'OPTIONS /auth/login', 'POST /auth/login', 'POST /oauth2/token', 'OPTIONS /auth/me', 'GET /auth/me'])
    );
  });

  test('a page of an origin not allowed gets no answer it may read, and cannot sign in', async () => {
    const { medplum, challenge } = pageClient('https://elsewhere.example');
    await expect(medplum.post('auth/method', { email: EMAIL })).rejects.toThrow('Failed to fetch');
    await expect(medplum.startLogin({ email: EMAIL, password: PASSWORD, projectId: DEMO_PROJECT, ...challenge })).rejects.toThrow('Failed to fetch');
  });
});
