/**
 * `POST /auth/login` under guessing and floods, as a browser's sign-in (MedplumClient's `startLogin` body) meets it
 * on the standalone host: each caller from a loopback address of its own. Failed sign-ins lock out their source,
 * and an account locks out the sources that failed on it, never its owner elsewhere; unknown e-mails count and
 * answer alike; the password checks have a bound of their own, beyond which the answer is a 429 with Retry-After in
 * Medplum's OperationOutcome shape.
 */
import { randomBytes } from 'node:crypto';
import type { Project } from '@medplum/fhirtypes';
import { inviteUser } from '../plugin/hosts/standalone/admin/invite-user.ts';
import { postJsonFrom, type ResponseFrom } from './support/from-address.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

const PASSWORD = 'a password of the owner 0123';

describe('sign-in limits on the standalone host', () => {
  let host: TestHost;
  let email: string;
  let colleague: string;

  beforeAll(async () => {
    host = await startTestHost({
      hostLimits: {
        signInLimits: { perSource: 4, perAccount: 3, windowSeconds: 60, lockoutSeconds: 120 },
        passwordChecks: { maxConcurrent: 1, maxWaiting: 0, maxWaitMs: 1000 },
      },
    });
    const seeded = await host.seedProject();
    email = `owner.${randomBytes(4).toString('hex')}@example.test`;
    colleague = `colleague.${randomBytes(4).toString('hex')}@example.test`;
    const project = await host.store.readResource<Project>('Project', seeded.projectId);
    await inviteUser(host.store, project, { resourceType: 'Practitioner', firstName: 'Olive', lastName: 'Owner', email, password: PASSWORD });
    await inviteUser(host.store, project, { resourceType: 'Practitioner', firstName: 'Colin', lastName: 'Colleague', email: colleague, password: PASSWORD });
  });

  afterAll(() => host.close());

  const signIn = (source: string, who: string, password: string): Promise<ResponseFrom> =>
    postJsonFrom(`${host.url}auth/login`, source, { email: who, password, codeChallenge: 'c'.repeat(43), codeChallengeMethod: 'plain' });

  test("wrong passwords lock the account out to their source, the right password too; its owner elsewhere signs in", async () => {
    const attacker = '127.0.10.1';
    const statuses: number[] = [];
    for (let guess = 0; guess < 6; guess++) statuses.push((await signIn(attacker, email, `guess-${guess}`)).status);
    expect(statuses).toEqual([400, 400, 400, 429, 429, 429]);

    const right = await signIn(attacker, email, PASSWORD);
    expect(right.status).toBe(429);
    expect(Number(right.headers['retry-after'])).toBeGreaterThan(60);
    expect(right.body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'throttled', details: { text: 'Too many failed attempts; try again later.' } }] });
    expect(right.body).not.toHaveProperty('code');

    const owner = await signIn('127.0.10.2', email, PASSWORD);
    expect(owner.status).toBe(200);
    expect(owner.body).toMatchObject({ login: expect.any(String), code: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  test('an unknown e-mail is answered as a wrong password is, and counts against its source like one', async () => {
    const source = '127.0.11.1';
    const wrong = await signIn(source, colleague.toUpperCase(), 'not it');
    const unknown = await signIn(source, `nobody.${colleague}`, 'not it');
    expect(unknown.status).toBe(400);
    expect(unknown.body).toEqual(wrong.body);
    for (let attempt = 0; attempt < 2; attempt++) expect((await signIn(source, `nobody-${attempt}.${colleague}`, 'not it')).status).toBe(400);
    // The fifth failure is past the source's four: it is locked out, of the colleague's account with the right password too.
    expect((await signIn(source, `nobody-2.${colleague}`, 'not it')).status).toBe(429);
    expect((await signIn(source, colleague, PASSWORD)).status).toBe(429);
    expect((await signIn('127.0.11.2', colleague, PASSWORD)).status).toBe(200);
  });

  test('password checks beyond the bound are refused at once, 429 with Retry-After: 1, in the OperationOutcome shape', async () => {
    const answers = await Promise.all(Array.from({ length: 4 }, (_, index) => signIn(`127.0.12.${index + 1}`, `flood-${index}@example.test`, 'flood')));
    const refused = answers.filter((answer) => answer.status === 429);
    expect(answers.filter((answer) => answer.status === 400).length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const answer of refused) {
      expect(answer.headers['retry-after']).toBe('1');
      expect(answer.body).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'throttled', details: { text: expect.stringMatching(/sign-ins are being checked/) } }] });
    }
  });
});
