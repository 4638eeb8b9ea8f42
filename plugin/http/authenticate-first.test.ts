import express, { type NextFunction, type Request, type Response } from 'express';
import request from 'supertest';
import { AppError, toAppError } from '../errors.ts';
import type { CallerContext, FhirgateHost } from '../host.ts';
import { authenticateFirst, authenticatingOncePerRequest } from './authenticate-first.ts';
import { readJsonBody } from './json-body.ts';

describe('authenticateFirst with authenticatingOncePerRequest', () => {
  const checked: string[] = [];
  const serverHost = {
    authenticate: async (incoming: Request) => {
      checked.push(incoming.get('authorization') ?? '');
      return incoming.get('authorization') === 'Bearer good' ? ({ project: { id: 'p1' } } as unknown as CallerContext) : undefined;
    },
  } as unknown as FhirgateHost;
  const host = authenticatingOncePerRequest(serverHost);
  const requireCaller = async (incoming: Request): Promise<CallerContext> => {
    const caller = await host.authenticate(incoming);
    if (!caller) throw new AppError('unauthenticated', 'Missing, invalid or expired access token.');
    return caller;
  };
  const app = express()
    .post('/', authenticateFirst(requireCaller), readJsonBody({ maxBytes: 1024, maxDepth: 8 }), async (incoming: Request, response: Response) => {
      // A later step asks again, as the chat pipeline's step 1 does.
      const caller = await requireCaller(incoming);
      response.json({ project: caller.project.id, body: incoming.body as unknown });
    })
    .use((thrown: unknown, _incoming: Request, response: Response, _next: NextFunction) => {
      const error = toAppError(thrown);
      response.status(error.status).json({ code: error.code });
    });

  beforeEach(() => {
    checked.length = 0;
  });

  test('a caller without a valid token is refused with 401 before its body is parsed: a body that is not JSON does not matter', async () => {
    const response = await request(app).post('/').set('Content-Type', 'application/json').send('{"not json').expect(401);
    expect(response.body).toEqual({ code: 'unauthenticated' });
  });

  test('a valid caller is checked once per request, however often its steps ask', async () => {
    await request(app).post('/').set('Authorization', 'Bearer good').send({ a: 1 }).expect(200, { project: 'p1', body: { a: 1 } });
    await request(app).post('/').set('Authorization', 'Bearer good').send({ a: 2 }).expect(200);
    expect(checked).toEqual(['Bearer good', 'Bearer good']);
  });
});
