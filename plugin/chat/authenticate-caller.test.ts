import express, { type Express, type Request } from 'express';
import request from 'supertest';
import { createTestTelemetry } from '../../test/support/telemetry.ts';
import { AppError } from '../errors.ts';
import type { CallerContext, FhirgateHost, HostLogger } from '../host.ts';
import { createRequestTelemetry } from '../telemetry/request-telemetry.ts';
import { authenticateCaller, PROJECT_BASE_PATH, projectOfPath } from './authenticate-caller.ts';

const CALLER = { project: { id: 'project-1' }, profile: { reference: 'Practitioner/alice' } } as unknown as CallerContext;

/** The plugin's `/v1` routes, mounted as the plugin mounts them, answering with the project the caller acts in or the error's code. */
function appWith(caller: CallerContext | undefined, options: { projectFromCredential?: boolean } = {}): { app: Express; logged: Record<string, unknown>[]; asked: Request[] } {
  const logged: Record<string, unknown>[] = [];
  const asked: Request[] = [];
  const host = {
    authenticate: async (incoming: Request) => {
      asked.push(incoming);
      return caller;
    },
  } as unknown as FhirgateHost;
  const logger: HostLogger = { debug: () => undefined, info: (_message, data) => void logged.push(data ?? {}), warn: () => undefined, error: () => undefined };
  const router = express.Router();
  router.get('/models', async (incoming, response) => {
    try {
      const context = await authenticateCaller(host, incoming, options);
      response.json({ project: context.project.id });
    } catch (error) {
      response.status(error instanceof AppError && error.code === 'forbidden' ? 403 : 401).json({ code: (error as AppError).code, message: (error as Error).message });
    }
  });
  const app = express();
  app.use(createRequestTelemetry(createTestTelemetry().telemetry, logger, undefined));
  app.use('/v1', router);
  app.use(PROJECT_BASE_PATH, router);
  app.use('/api/projects/:projectId/v1', router);
  return { app, logged, asked };
}

describe('authenticateCaller (step 1 of the spec)', () => {
  test('no caller (a missing, invalid or expired token): 401, whatever else the request says', async () => {
    const { app } = appWith(undefined);
    const response = await request(app).get('/v1/models').set('X-Project-ID', 'project-1').expect(401);
    expect(response.body).toEqual({ code: 'unauthenticated', message: 'Missing, invalid or expired access token.' });
  });

  test("the caller's own project in X-Project-ID: the caller, named in the request's log line", async () => {
    const { app, logged, asked } = appWith(CALLER);
    await request(app).get('/v1/models').set('Authorization', 'Bearer t').set('X-Project-ID', 'project-1').expect(200, { project: 'project-1' });
    expect(asked).toHaveLength(1);
    expect(logged).toEqual([expect.objectContaining({ caller: 'Practitioner/alice', status: 200 })]);
  });

  test('a caller without a profile reference is logged without one', async () => {
    const { app, logged } = appWith({ ...CALLER, profile: {} } as CallerContext);
    await request(app).get('/v1/models').set('X-Project-ID', 'project-1').expect(200);
    expect(logged[0]).not.toHaveProperty('caller');
  });

  test('X-Project-ID with spaces around it names the same project', async () => {
    const { app } = appWith(CALLER);
    await request(app).get('/v1/models').set('X-Project-ID', '  project-1 ').expect(200, { project: 'project-1' });
  });

  test('no X-Project-ID, or a blank one, on /v1: 401 naming the header', async () => {
    const { app } = appWith(CALLER);
    for (const header of [undefined, '   ']) {
      const call = request(app).get('/v1/models');
      const response = await (header === undefined ? call : call.set('X-Project-ID', header)).expect(401);
      expect(response.body).toEqual({ code: 'unauthenticated', message: 'Missing X-Project-ID header.' });
    }
  });

  test("another project in X-Project-ID: 403, the token's project named as the header's", async () => {
    const { app } = appWith(CALLER);
    const response = await request(app).get('/v1/models').set('X-Project-ID', 'project-2').expect(403);
    expect(response.body).toEqual({ code: 'forbidden', message: 'The access token does not belong to the project named in X-Project-ID.' });
  });

  test('the project base URL names the project: no header needed; another project is 403 naming the base URL', async () => {
    const { app } = appWith(CALLER);
    await request(app).get('/projects/project-1/v1/models').expect(200, { project: 'project-1' });
    const response = await request(app).get('/projects/project-2/v1/models').expect(403);
    expect(response.body).toEqual({ code: 'forbidden', message: 'The credential does not belong to the project named in the base URL.' });
  });

  test('under the base URL a header that agrees is accepted; one that names another project is 403, even the credential\'s own', async () => {
    const { app } = appWith(CALLER);
    await request(app).get('/projects/project-1/v1/models').set('X-Project-ID', 'project-1').expect(200);
    const response = await request(app).get('/projects/project-2/v1/models').set('X-Project-ID', 'project-1').expect(403);
    expect(response.body.message).toBe('X-Project-ID names another project than the base URL (/projects/{project_id}/...).');
  });

  test('projectFromCredential (the MCP endpoint): no project named acts in the credential\'s; one named is still checked', async () => {
    const { app } = appWith(CALLER, { projectFromCredential: true });
    await request(app).get('/v1/models').expect(200, { project: 'project-1' });
    await request(app).get('/v1/models').set('X-Project-ID', 'project-2').expect(403);
  });
});

describe('projectOfPath', () => {
  test('the project of /projects/{id}/v1 and /projects/{id}/mcp, under any prefix; none for /v1', async () => {
    const seen: (string | undefined)[] = [];
    const app = express();
    const record = (incoming: Request, response: express.Response) => {
      seen.push(projectOfPath(incoming));
      response.end();
    };
    app.use('/v1', record);
    app.use('/projects/:projectId/v1', record);
    app.use('/projects/:projectId/mcp', record);
    app.use('/api/projects/:projectId/v1', record);
    app.use('/projects/:projectId/v1beta', record);
    for (const path of ['/v1/models', '/projects/p%201/v1/models', '/projects/abc/mcp', '/api/projects/xyz/v1/chat', '/projects/abc/v1beta/models']) {
      await request(app).get(path);
    }
    expect(seen).toEqual([undefined, 'p 1', 'abc', 'xyz', undefined]);
    // A project id that does not decode (a host that does not decode its params first) is taken as written.
    expect(projectOfPath({ baseUrl: '/projects/%E0%A4%A/v1' } as Request)).toBe('%E0%A4%A');
  });
});
