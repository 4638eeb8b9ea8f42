import { jest } from '@jest/globals';
import { OperationOutcomeError, createReference, getStatus } from '@medplum/core';
import type { Communication, Device, Observation, Patient } from '@medplum/fhirtypes';
import express, { type Express } from 'express';
import request from 'supertest';
import { startLlmEmulator, type LlmEmulator } from '../../test/emulator/index.ts';
import { buildDevicePolicy } from '../devices/device-services.ts';
import { createDeviceTokenService } from '../devices/device-tokens.ts';
import type { FhirgateOptionsInput } from '../options.ts';
import { createMedplumServerHost, mountFhirgate } from './medplum-server.ts';
import {
  StandInAuthenticatedContext,
  createMedplumStandIn,
  type MedplumStandIn,
  type StandInProject,
} from '../../test/support/medplum-stand-in.ts';

const MODEL = 'emulator/echo';

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (error instanceof OperationOutcomeError) {
      return getStatus(error.outcome);
    }
    throw error;
  }
}

/** A device token as fhirgate's token exchange issues it (HS256, `typ: device+jwt`, `is_device`). */
async function deviceToken(): Promise<string> {
  const tokens = createDeviceTokenService(['a device signing secret of the test'], 5);
  return (await tokens.issue({ deviceId: 'sensor-1', deviceResourceId: 'device-1' })).access;
}

describe('createMedplumServerHost', () => {
  let medplum: MedplumStandIn;
  let clinic: StandInProject;

  beforeEach(async () => {
    medplum = await createMedplumStandIn();
    clinic = await medplum.createProject('clinic');
  });

  /** Medplum's order: the request context first, then the routes; `/whoami` asks the adapter who the caller is. */
  function whoamiApp(): Express {
    const host = createMedplumServerHost(medplum.functions);
    const app = express();
    app.use(medplum.attachRequestContext);
    app.get('/whoami', async (incoming, response) => {
      const caller = await host.authenticate(incoming);
      if (!caller) {
        response.json(null);
        return;
      }
      const context = medplum.requestContextStore.getStore();
      response.json({
        project: caller.project.id,
        membership: caller.membership.id,
        login: caller.login.id,
        profile: caller.profile.reference,
        sameRepoAsMedplumRoutes: context instanceof StandInAuthenticatedContext && caller.repo === context.repo,
      });
    });
    return app;
  }

  test("authenticate resolves the caller exactly as Medplum's request context holds it", async () => {
    const token = await medplum.issueAccessToken(clinic.login, clinic.membership);
    const response = await request(whoamiApp()).get('/whoami').set('Authorization', `Bearer ${token}`).expect(200);
    expect(response.body).toEqual({
      project: clinic.project.id,
      membership: clinic.membership.id,
      login: clinic.login.id,
      profile: `Practitioner/${clinic.practitioner.id}`,
      sameRepoAsMedplumRoutes: true,
    });
  });

  test('authenticate resolves undefined, without throwing, for every request without a valid user bearer token', async () => {
    const token = await medplum.issueAccessToken(clinic.login, clinic.membership);
    await medplum.store.updateResource({ ...clinic.login, revoked: true });
    const app = whoamiApp();
    const authorizations = [
      undefined,
      'Bearer not-a-jwt',
      `Bearer ${token}`, // its Login is revoked now
      `Bearer ${await deviceToken()}`,
      `Basic ${Buffer.from('client:secret').toString('base64')}`,
    ];
    for (const authorization of authorizations) {
      const call = request(app).get('/whoami');
      const response = await (authorization ? call.set('Authorization', authorization) : call).expect(200);
      expect(response.body).toBeNull();
    }
  });

  test('a device token is refused even if the request context were to name a caller', async () => {
    const host = createMedplumServerHost(medplum.functions);
    const repo = medplum.functions.createRepository({
      author: clinic.membership.profile,
      projects: [clinic.project],
      currentProject: clinic.project,
      superAdmin: false,
      projectAdmin: false,
    });
    const claimed = new StandInAuthenticatedContext('request-x', medplum.functions.logger, clinic, repo);
    const app = express();
    app.use((_incoming, _response, next) => medplum.requestContextStore.run(claimed, () => next()));
    app.get('/whoami', async (incoming, response) => {
      response.json((await host.authenticate(incoming)) ?? null);
    });
    const response = await request(app).get('/whoami').set('Authorization', `Bearer ${await deviceToken()}`).expect(200);
    expect(response.body).toBeNull();
  });

  test('getSystemRepo has system rights inside the one project: writes land there, authored as system', async () => {
    const host = createMedplumServerHost(medplum.functions);
    const repo = await host.getSystemRepo(clinic.project.id);
    const device = await repo.createResource<Device>({ resourceType: 'Device', status: 'active' });

    expect(device.meta?.project).toBe(clinic.project.id);
    expect(device.meta?.author).toEqual({ reference: 'system' });
    expect(medplum.repositoryContexts).toHaveLength(1);
    expect(medplum.repositoryContexts[0]).toMatchObject({
      author: { reference: 'system' },
      currentProject: { id: clinic.project.id },
      superAdmin: false,
    });
    expect(medplum.repositoryContexts[0].accessPolicy).toBeUndefined();
    expect(medplum.repositoryContexts[0].projects[0].id).toBe(clinic.project.id);
  });

  test('getDeviceRepo acts as the device in its project, under the AccessPolicy it is given', async () => {
    const host = createMedplumServerHost(medplum.functions);
    const device = await (await host.getSystemRepo(clinic.project.id)).createResource<Device>({ resourceType: 'Device', status: 'active' });
    const repo = await host.getDeviceRepo(clinic.project.id, buildDevicePolicy(device.id), createReference(device));
    const observation: Observation = { resourceType: 'Observation', status: 'final', code: { text: 'heart rate' } };

    const own = await repo.createResource<Observation>({ ...observation, device: createReference(device) });
    expect(own.meta?.author).toEqual(createReference(device));
    expect(own.meta?.project).toBe(clinic.project.id);
    expect(await statusOf(repo.createResource(observation))).toBe(403);
    expect(await statusOf(repo.createResource<Patient>({ resourceType: 'Patient' }))).toBe(403);
    expect(medplum.repositoryContexts[1]).toMatchObject({
      author: createReference(device),
      currentProject: { id: clinic.project.id },
      accessPolicy: buildDevicePolicy(device.id),
      superAdmin: false,
      projectAdmin: false,
    });
  });

  test("a turn's repositories read the Project once: a read is used again for the next seconds, then read afresh", async () => {
    let projectReads = 0;
    const host = createMedplumServerHost({
      ...medplum.functions,
      getProjectSystemRepo: async (projectId) => {
        projectReads += 1;
        return medplum.functions.getProjectSystemRepo(projectId);
      },
    });
    const device = await (await host.getSystemRepo(clinic.project.id)).createResource<Device>({ resourceType: 'Device', status: 'active' });
    await host.getDeviceRepo(clinic.project.id, buildDevicePolicy(device.id), createReference(device));
    await host.getSystemRepo(clinic.project.id);
    expect(projectReads).toBe(1);

    jest.useFakeTimers({ now: Date.now() + 6_000, doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      await host.getSystemRepo(clinic.project.id);
      expect(projectReads).toBe(2);
    } finally {
      jest.useRealTimers();
    }
  });

  test("the logger writes to the request's logger inside a request and to the server's logger outside one", async () => {
    const host = createMedplumServerHost(medplum.functions);
    host.logger?.info('outside');
    const app = express();
    app.use(medplum.attachRequestContext);
    app.get('/log', (_incoming, response) => {
      host.logger?.warn('inside', { step: 1 });
      response.end();
    });
    await request(app).get('/log').expect(200);
    expect(medplum.logged).toEqual([
      { level: 'info', message: 'outside', data: undefined, metadata: { logger: 'global' } },
      { level: 'warn', message: 'inside', data: { step: 1 }, metadata: { requestId: 'request-1' } },
    ]);
  });
});

describe('fhirgate mounted on a Medplum-like app', () => {
  let emulator: LlmEmulator;
  let medplum: MedplumStandIn;
  let clinic: StandInProject;
  let token: string;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
  });

  afterAll(async () => {
    await emulator.close();
  });

  beforeEach(async () => {
    emulator.reset();
    medplum = await createMedplumStandIn();
    clinic = await medplum.createProject('clinic');
    token = await medplum.issueAccessToken(clinic.login, clinic.membership);
  });

  function pluginOptions(overrides: FhirgateOptionsInput = {}): FhirgateOptionsInput {
    return {
      llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: ['echo'] } }, defaultModel: MODEL },
      ...overrides,
    };
  }

  /** Medplum's app.ts order, with fhirgate mounted before or after Medplum's body parsers. */
  function medplumApp(placement: 'before-body-parsers' | 'after-body-parsers', options = pluginOptions()): Express {
    const app = express();
    app.use(medplum.attachRequestContext);
    if (placement === 'before-body-parsers') {
      mountFhirgate(app, medplum.functions, options);
    }
    app.use(express.urlencoded({ extended: false }));
    app.use(express.json({ type: ['application/json', 'application/*+json'], limit: '1mb' }));
    if (placement === 'after-body-parsers') {
      mountFhirgate(app, medplum.functions, options);
    }
    app.get('/auth/me', medplum.authenticateRequest, (_incoming, response) => {
      response.json({ ok: true });
    });
    // Medplum's own MCP server (config.mcpEnabled) is under /mcp too: /mcp/stream and /mcp/sse.
    app.all('/mcp/stream', medplum.authenticateRequest, (_incoming, response) => {
      response.json({ server: 'medplum' });
    });
    app.use(medplum.errorHandler);
    return app;
  }

  test('a valid Medplum token reaches the plugin as its caller; the provider is not called for the model list', async () => {
    const response = await request(medplumApp('before-body-parsers'))
      .get('/v1/models')
      .set('Authorization', `Bearer ${token}`)
      .set('X-Project-ID', clinic.project.id)
      .expect(200);
    // Not cleared for patient data by this server's options: the list says so.
    expect(response.body).toEqual({ object: 'list', data: [{ id: MODEL, object: 'model', created: 0, owned_by: 'fhirgate', fhirgate: { patient_data: 'refused' } }] });
    expect(emulator.received).toHaveLength(0);
  });

  test("the caller's project is the one Medplum resolved: another project in X-Project-ID is 403", async () => {
    const other = await medplum.createProject('other');
    const response = await request(medplumApp('before-body-parsers'))
      .get('/v1/models')
      .set('Authorization', `Bearer ${token}`)
      .set('X-Project-ID', other.project.id)
      .expect(403);
    expect(response.body.error.code).toBe('forbidden');
  });

  test.each([
    ['no token', undefined],
    ['an invalid token', 'Bearer not-a-jwt'],
    ['a device token', 'device'],
  ])("%s gets the plugin's 401 error body, where Medplum's own route answers an OperationOutcome", async (_name, authorization) => {
    const app = medplumApp('before-body-parsers');
    const header = authorization === 'device' ? `Bearer ${await deviceToken()}` : authorization;
    const withHeader = (call: request.Test): request.Test => (header ? call.set('Authorization', header) : call);

    const plugin = await withHeader(request(app).get('/v1/models').set('X-Project-ID', clinic.project.id)).expect(401);
    expect(plugin.body).toEqual({ error: { message: 'Missing, invalid or expired access token.', type: 'authentication_error', code: 'unauthenticated', param: null } });
    const own = await withHeader(request(app).get('/auth/me')).expect(401);
    expect(own.body.resourceType).toBe('OperationOutcome');
  });

  test('a chat turn is stored by the caller in its project, answered by the agent Device the system repository made there', async () => {
    const response = await request(medplumApp('before-body-parsers'))
      .post('/v1/chat/completions')
      .set('Authorization', `Bearer ${token}`)
      .set('X-Project-ID', clinic.project.id)
      .send({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })
      .expect(200);
    expect(response.body.choices[0].message.content).toBe('Echo: hi');

    const reply = await medplum.store.readResource<Communication>('Communication', response.body.communication_id);
    const prompt = await medplum.store.readReference<Communication>(reply.inResponseTo?.[0] as { reference: string });
    const agent = await medplum.store.readReference<Device>(reply.sender as { reference: string });
    expect(prompt.sender).toEqual(clinic.membership.profile);
    expect(prompt.meta?.author).toEqual(clinic.membership.profile);
    expect(prompt.meta?.project).toBe(clinic.project.id);
    expect(reply.meta?.project).toBe(clinic.project.id);
    expect(agent.meta).toMatchObject({ project: clinic.project.id, author: { reference: 'system' } });
  });

  test("a ClientApplication's API key as the bearer token is authenticated by Medplum's own Basic auth, on fhirgate's routes only; a rotated secret is 401 at once", async () => {
    const { client } = await medplum.createClient(clinic, 'Open WebUI (Dr. Ada)');
    const key = `${client.id}:${client.secret}`;
    const app = medplumApp('before-body-parsers');
    const response = await request(app)
      .post(`/projects/${clinic.project.id}/v1/chat/completions`)
      .set('Authorization', `Bearer ${key}`)
      .send({ model: MODEL, messages: [{ role: 'user', content: 'with a key' }] })
      .expect(200);
    const reply = await medplum.store.readResource<Communication>('Communication', response.body.communication_id);
    const prompt = await medplum.store.readReference<Communication>(reply.inResponseTo?.[0] as { reference: string });
    expect(prompt.meta?.author).toEqual({ reference: `ClientApplication/${client.id}`, display: 'Open WebUI (Dr. Ada)' });
    // Basic auth, as Medplum's own clients send it, is the same caller.
    await request(app)
      .get('/v1/models')
      .set('Authorization', `Basic ${Buffer.from(key).toString('base64')}`)
      .set('X-Project-ID', clinic.project.id)
      .expect(200);
    // The MCP endpoint takes the key as the chat does, at /mcp and under the project base URL.
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'editor', version: '1' } } };
    for (const [path, project] of [['/mcp', clinic.project.id], [`/projects/${clinic.project.id}/mcp`, undefined]] as const) {
      const mcp = request(app).post(path).set('Authorization', `Bearer ${key}`).set('Accept', 'application/json, text/event-stream');
      const answered = await (project ? mcp.set('X-Project-ID', project) : mcp).send(initialize);
      expect(answered.status).toBe(200);
    }
    // Medplum's own routes see the bearer key as it came, and refuse it as Medplum does (its MCP server's too).
    await request(app).get('/auth/me').set('Authorization', `Bearer ${key}`).expect(401);
    await request(app).post('/mcp/stream').set('Authorization', `Bearer ${key}`).send(initialize).expect(401);

    await medplum.store.updateResource({ ...client, secret: 'a-rotated-secret' });
    const refused = await request(app).get(`/projects/${clinic.project.id}/v1/models`).set('Authorization', `Bearer ${key}`).expect(401);
    expect(refused.body.error).toMatchObject({ code: 'unauthenticated', type: 'authentication_error' });
  });

  test('without attachRequestContext in the mount, a bearer key is not a credential (401), Basic auth still is', async () => {
    const { client } = await medplum.createClient(clinic, 'integration');
    const key = `${client.id}:${client.secret}`;
    const app = express();
    app.use(medplum.attachRequestContext);
    mountFhirgate(app, { ...medplum.functions, attachRequestContext: undefined }, pluginOptions());
    await request(app).get('/v1/models').set('Authorization', `Bearer ${key}`).set('X-Project-ID', clinic.project.id).expect(401);
    await request(app).get('/v1/models').set('Authorization', `Basic ${Buffer.from(key).toString('base64')}`).set('X-Project-ID', clinic.project.id).expect(200);
  });

  test("fhirgate's responses and its request log line carry the request id of Medplum's request context; Medplum's own routes are left alone", async () => {
    const app = medplumApp('before-body-parsers');
    const response = await request(app).get('/v1/models').set('Authorization', `Bearer ${token}`).set('X-Project-ID', clinic.project.id).expect(200);
    const requestId = response.headers['x-request-id'];
    expect(requestId).toMatch(/^request-\d+$/);
    expect(medplum.logged).toContainEqual(
      expect.objectContaining({ level: 'info', message: 'fhirgate request', data: expect.objectContaining({ requestId, route: '/v1/models', status: 200 }), metadata: { requestId } })
    );

    const before = medplum.logged.length;
    const own = await request(app).get('/auth/me').set('Authorization', `Bearer ${token}`).expect(200);
    expect(own.headers['x-request-id']).toBeUndefined();
    expect(medplum.logged).toHaveLength(before);
  });

  test("fhirgate's MCP endpoint is /mcp itself: Medplum's own MCP server under /mcp/ is left to Medplum", async () => {
    const app = medplumApp('before-body-parsers');
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } };
    // No X-Project-ID: a request fhirgate took would be its 401.
    const medplums = await request(app).post('/mcp/stream').set('Authorization', `Bearer ${token}`).send(initialize).expect(200);
    expect(medplums.body).toEqual({ server: 'medplum' });
    const own = await request(app).post('/mcp').send(initialize).expect(401);
    expect(own.headers['www-authenticate']).toMatch(/resource_metadata=/);
  });

  test("mounted before Medplum's body parsers, the plugin's own parser, size limit and error bodies apply", async () => {
    const app = medplumApp('before-body-parsers', pluginOptions({ maxBodyBytes: 256 }));
    const call = (): request.Test =>
      request(app).post('/v1/chat/completions').set('Authorization', `Bearer ${token}`).set('X-Project-ID', clinic.project.id);

    const tooLarge = await call().send({ messages: [{ role: 'user', content: 'x'.repeat(1000) }] }).expect(413);
    expect(tooLarge.body.error.code).toBe('payload_too_large');
    const malformed = await call().set('Content-Type', 'application/json').send('{"messages": [').expect(400);
    expect(malformed.body.error.code).toBe('invalid_request');
  });

  test("mounted after Medplum's body parsers, Medplum's parser answers first (which is why it goes before them)", async () => {
    const response = await request(medplumApp('after-body-parsers'))
      .post('/v1/chat/completions')
      .set('Authorization', `Bearer ${token}`)
      .set('X-Project-ID', clinic.project.id)
      .set('Content-Type', 'application/json')
      .send('{"messages": [')
      .expect(400);
    expect(response.body.resourceType).toBe('OperationOutcome');
  });

  test("a server whose definitions are not loaded is refused at mount, with what to fix, not per request", () => {
    const app = express();
    const unloaded = { ...medplum.functions, isResourceType: (type: string) => type === 'Patient' };
    expect(() => mountFhirgate(app, unloaded, pluginOptions())).toThrow(
      /do not define Communication, Observation, Device, AuditEvent\. Load Medplum's StructureDefinitions first/
    );
  });

  test("/graphql runs on the server's own FhirRouter, made through the host port", async () => {
    const made: unknown[] = [];
    const { FhirRouter } = medplum.functions;
    const counting = { ...medplum.functions, FhirRouter: class extends FhirRouter { constructor(options: { introspectionEnabled?: boolean }) { super(options); made.push(options); } } };
    const app = express();
    app.use(medplum.attachRequestContext);
    mountFhirgate(app, counting, pluginOptions());
    expect(made).toEqual([{ introspectionEnabled: false }]);
    const patient = await medplum.store.createResource<Patient>({ resourceType: 'Patient', meta: { project: clinic.project.id } });
    const response = await request(app)
      .post('/graphql')
      .set('Authorization', `Bearer ${token}`)
      .set('X-Project-ID', clinic.project.id)
      .send({ query: '{ PatientList { id } }' })
      .expect(200);
    expect(response.body).toEqual({ data: { PatientList: [{ id: patient.id }] } });
  });

  test("mounted before Medplum's request context, every request fails loudly (500, logged) instead of a false 401", async () => {
    const app = express();
    mountFhirgate(app, medplum.functions, pluginOptions());
    app.use(medplum.attachRequestContext);
    const response = await request(app).get('/v1/models').set('Authorization', `Bearer ${token}`).set('X-Project-ID', clinic.project.id).expect(500);
    expect(response.body.error.code).toBe('internal_error');
    expect(medplum.logged.some((line) => line.level === 'error' && String(line.data?.cause).includes('attachRequestContext'))).toBe(true);
  });
});
