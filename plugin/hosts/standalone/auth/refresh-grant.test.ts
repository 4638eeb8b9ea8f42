/**
 * "Remember me" renews a session as Medplum's does: the sign-in's token response carries a refresh token, the
 * refresh_token grant gives a new access token (and a new refresh token: each serves once), and nothing renews a
 * session that was signed out. Without "Remember me" there is no refresh token.
 */
import { MemoryRepository } from '@medplum/fhir-router';
import type { User } from '@medplum/fhirtypes';
import request from 'supertest';
import { createStandaloneHost, type StandaloneHost } from '../create-standalone-host.ts';
import { createJsonLogger } from '../logger.ts';
import { readProjectFixture, seedProject, type SeededProject } from '../seed.ts';
import { hashPassword } from './passwords.ts';

const EMAIL = 'alice.carter@example.org';
const PASSWORD = 'correct horse battery staple';

describe('the refresh_token grant', () => {
  let standalone: StandaloneHost;
  let project: SeededProject;

  beforeAll(async () => {
    const store = new MemoryRepository();
    standalone = await createStandaloneHost({ store, baseUrl: 'http://localhost:8103/', logger: createJsonLogger('silent') });
    project = await seedProject(store, await readProjectFixture(), { freshIds: true });
    const user = await store.readResource<User>('User', project.ids['practitioner-user']);
    await store.updateResource<User>({ ...user, passwordHash: await hashPassword(PASSWORD) });
  });

  async function signIn(remember: boolean): Promise<Record<string, string>> {
    const login = await request(standalone.app).post('/auth/login').send({ email: EMAIL, password: PASSWORD, remember, projectId: project.projectId });
    expect(login.status).toBe(200);
    const tokens = await request(standalone.app).post('/oauth2/token').type('form').send({ grant_type: 'authorization_code', code: login.body.code });
    expect(tokens.status).toBe(200);
    return tokens.body as Record<string, string>;
  }

  const refresh = (token: string) => request(standalone.app).post('/oauth2/token').type('form').send({ grant_type: 'refresh_token', refresh_token: token });
  const me = (token: string) => request(standalone.app).get('/auth/me').auth(token, { type: 'bearer' });

  test('a remembered sign-in is renewed, and each refresh token serves once', async () => {
    const first = await signIn(true);
    expect(first.refresh_token).toEqual(expect.any(String));
    const renewed = await refresh(first.refresh_token);
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, profile: { reference: expect.stringMatching(/^Practitioner\//) } });
    expect((await me(renewed.body.access_token)).status).toBe(200);
    expect(renewed.body.refresh_token).not.toBe(first.refresh_token);

    const replayed = await refresh(first.refresh_token);
    expect(replayed.status).toBe(400);
    expect(replayed.body.error).toBe('invalid_grant');
    expect((await refresh(renewed.body.refresh_token)).status).toBe(200);
  });

  test('a signed-out session is not renewed', async () => {
    const session = await signIn(true);
    expect((await request(standalone.app).post('/oauth2/logout').auth(session.access_token, { type: 'bearer' })).status).toBe(200);
    const renewed = await refresh(session.refresh_token);
    expect(renewed.status).toBe(400);
    expect(renewed.body.error).toBe('invalid_grant');
  });

  test('without "Remember me" there is no refresh token; tokens are not interchangeable', async () => {
    const session = await signIn(false);
    expect(session.refresh_token).toBeUndefined();
    expect((await refresh(session.access_token)).status).toBe(400);
    const remembered = await signIn(true);
    expect((await me(remembered.refresh_token)).status).toBe(401);
    expect((await refresh('not-a-token')).body.error).toBe('invalid_grant');
  });
});
