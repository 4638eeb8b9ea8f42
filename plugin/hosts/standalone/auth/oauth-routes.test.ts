import request from 'supertest';
import { MemoryRepository } from '@medplum/fhir-router';
import { createStandaloneHost, type StandaloneHost } from '../create-standalone-host.ts';
import { createJsonLogger } from '../logger.ts';
import { readProjectFixture, seedProject, type SeededProject } from '../seed.ts';

describe('OAuth routes', () => {
  let standalone: StandaloneHost;
  let project: SeededProject;

  beforeAll(async () => {
    const store = new MemoryRepository();
    standalone = await createStandaloneHost({ store, baseUrl: 'http://localhost:8103/', logger: createJsonLogger('silent') });
    project = await seedProject(store, await readProjectFixture(), { freshIds: true });
  });

  test('client credentials give a Medplum-format token response', async () => {
    const response = await request(standalone.app)
      .post('/oauth2/token')
      .type('form')
      .send({ grant_type: 'client_credentials', client_id: project.client?.id, client_secret: project.client?.secret });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      token_type: 'Bearer',
      expires_in: 3600,
      project: { reference: `Project/${project.projectId}` },
      profile: { reference: `ClientApplication/${project.client?.id}` },
    });
    expect(response.body.access_token.split('.')).toHaveLength(3);
  });

  test('credentials in a Basic header work too', async () => {
    const response = await request(standalone.app)
      .post('/oauth2/token')
      .auth(project.client?.id ?? '', project.client?.secret ?? '')
      .type('form')
      .send({ grant_type: 'client_credentials' });
    expect(response.status).toBe(200);
  });

  test('a wrong secret is refused without echoing it', async () => {
    const response = await request(standalone.app)
      .post('/oauth2/token')
      .type('form')
      .send({ grant_type: 'client_credentials', client_id: project.client?.id, client_secret: 'guessed-secret' });
    expect(response.status).toBe(401);
    expect(response.body.error).toBe('invalid_client');
    expect(JSON.stringify(response.body)).not.toContain('guessed-secret');
  });

  test('other grants and missing credentials are 400', async () => {
    const grant = await request(standalone.app).post('/oauth2/token').type('form').send({ grant_type: 'password', username: 'a', password: 'b' });
    expect(grant.status).toBe(400);
    expect(grant.body.error).toBe('unsupported_grant_type');
    const missing = await request(standalone.app).post('/oauth2/token').type('form').send({ grant_type: 'client_credentials' });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe('invalid_request');
  });

  test('signing out revokes the session: its token authenticates nobody afterwards, on every route', async () => {
    const issued = await request(standalone.app)
      .post('/oauth2/token')
      .type('form')
      .send({ grant_type: 'client_credentials', client_id: project.client?.id, client_secret: project.client?.secret });
    const token = issued.body.access_token as string;
    expect((await request(standalone.app).get('/auth/me').auth(token, { type: 'bearer' })).status).toBe(200);
    const signOut = await request(standalone.app).post('/oauth2/logout').auth(token, { type: 'bearer' }).send({});
    expect(signOut.status).toBe(200);
    expect(signOut.body).toEqual({ ok: true });
    expect((await request(standalone.app).get('/auth/me').auth(token, { type: 'bearer' })).status).toBe(401);
    expect((await request(standalone.app).get('/fhir/R4/Patient').auth(token, { type: 'bearer' })).status).toBe(401);
    expect((await request(standalone.app).post('/oauth2/logout').auth(token, { type: 'bearer' })).status).toBe(401);
  });

  test('signing out without a session is 401', async () => {
    expect((await request(standalone.app).get('/oauth2/logout')).status).toBe(401);
  });

  test('the JWKS publishes the public signing key only', async () => {
    const response = await request(standalone.app).get('/.well-known/jwks.json');
    expect(response.status).toBe(200);
    expect(response.body.keys).toHaveLength(1);
    expect(response.body.keys[0]).toMatchObject({ alg: 'RS256', kty: 'RSA', use: 'sig' });
    expect(response.body.keys[0].kid).toBeTruthy();
    expect(response.body.keys[0].d).toBeUndefined();
  });

  test('/auth/me without a token is 401', async () => {
    expect((await request(standalone.app).get('/auth/me')).status).toBe(401);
  });
});
