import { SpanStatusCode, trace } from '@opentelemetry/api';
import express, { type Express } from 'express';
import request from 'supertest';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { createTestTelemetry, type TestTelemetry } from '../../test/support/telemetry.ts';
import type { HostLogger } from '../host.ts';
import { AppError } from '../errors.ts';
import { sendGraphqlError } from '../graphql/graphql-response.ts';
import { sendOpenAiError } from '../http/openai-error-response.ts';
import { annotateCaller, annotateRequest, createRequestTelemetry, requestContextOf, requestIdOf, routeOf } from './request-telemetry.ts';

interface Line {
  readonly level: string;
  readonly message: string;
  readonly data?: Record<string, unknown>;
}

function capturingLogger(lines: Line[]): HostLogger {
  const log = (level: string) => (message: string, data?: Record<string, unknown>) => lines.push({ level, message, data });
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}

describe('routeOf', () => {
  test.each([
    ['/v1/chat/completions', '/v1/chat/completions'],
    ['/V1/Chat/Completions/', '/v1/chat/completions'],
    ['/v1/models', '/v1/models'],
    ['/v1/embeddings', '/v1/*'],
    ['/v1/models/openai/gpt-4o', '/v1/models/{id}'],
    ['/v1/responses', '/v1/responses'],
    ['/v1/responses/resp_0b5e', '/v1/responses/{id}'],
    ['/account/api/token/device', '/account/api/token/device/'],
    ['/account/api/token/device/', '/account/api/token/device/'],
    ['/graphql', '/graphql'],
    ['/projects/3f2c/v1/chat/completions', '/v1/chat/completions'],
    ['/projects/3f2c/v1/models/openai/gpt-4o', '/v1/models/{id}'],
    ['/projects/3f2c/v1', '/v1/*'],
    ['/projects/3f2c/v10/models', undefined],
    ['/projects/3f2c/v1/chat/completions//', '/v1/chat/completions'],
    ['/projects//v1/models', undefined],
    ['/projects/3f2c', undefined],
    ['/mcp', '/mcp'],
    ['/projects/3f2c/mcp', '/mcp'],
    ['/projects/3f2c/mcp/extra', undefined],
    ['/fhir/R4/Patient', undefined],
    ['/auth/login', undefined],
    ['/v10/models', undefined],
  ])('%s → %s', (path, route) => {
    expect(routeOf(path)).toBe(route);
  });
});

describe('request telemetry', () => {
  let recorded: TestTelemetry;
  let lines: Line[];
  let app: Express;

  beforeEach(() => {
    recorded = createTestTelemetry();
    lines = [];
    app = express();
    app.use(createRequestTelemetry(recorded.telemetry, capturingLogger(lines), (incoming) => incoming.get('x-host-request-id')));
    app.post('/v1/chat/completions', (_incoming, response) => {
      annotateRequest(response, { projectId: 'project-1', model: 'demo/echo', skipped: undefined });
      response.status(201).json({ requestId: requestIdOf(response) });
    });
    app.get('/graphql', (_incoming, response) => {
      response.status(503).end();
    });
    app.post('/v1/responses', (incoming, response) => {
      annotateCaller(incoming, 'Practitioner/practitioner-1');
      sendOpenAiError(response, new AppError('forbidden', 'You may not read private text.'));
    });
    app.post('/graphql', (incoming, response) => {
      annotateCaller(incoming, 'Device/device-1');
      sendGraphqlError(response, new AppError('rate_limited', 'Too many requests.'));
    });
    app.get('/v1/models', (_incoming, response) => {
      response.json({ spanId: trace.getSpan(requestContextOf(response))?.spanContext().spanId ?? null });
    });
    app.get('/fhir/R4/Patient', (_incoming, response) => {
      response.json({ requestId: requestIdOf(response) ?? null });
    });
  });

  test('a plugin request gets an id, a span, a duration by route and status, and one log line of ids only', async () => {
    const response = await request(app).post('/v1/chat/completions').send({ messages: [{ role: 'user', content: 'private text' }] }).expect(201);
    const requestId = response.headers['x-request-id'];
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(response.body.requestId).toBe(requestId);

    const [duration] = await recorded.points('fhirgate.http.server.request.duration');
    expect(duration.attributes).toEqual({ 'http.request.method': 'POST', 'http.route': '/v1/chat/completions', 'http.response.status_code': 201 });
    expect((duration.value as Histogram).count).toBe(1);
    const [span] = recorded.spans();
    expect(span.name).toBe('POST /v1/chat/completions');
    expect(span.attributes).toMatchObject({ 'fhirgate.request_id': requestId, 'http.response.status_code': 201, projectId: 'project-1' });
    expect(lines).toEqual([
      {
        level: 'info',
        message: 'fhirgate request',
        data: { requestId, method: 'POST', route: '/v1/chat/completions', status: 201, durationMs: expect.any(Number), projectId: 'project-1', model: 'demo/echo' },
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain('private text');
  });

  test("a refused request's line names its error code and its caller, never the message", async () => {
    await request(app).post('/v1/responses').send({ input: 'private text' }).expect(403);
    await request(app).post('/graphql').send({ query: '{ private }' }).expect(429);
    expect(lines.map((line) => line.data)).toEqual([
      expect.objectContaining({ route: '/v1/responses', status: 403, code: 'forbidden', caller: 'Practitioner/practitioner-1' }),
      expect.objectContaining({ route: '/graphql', status: 429, code: 'rate_limited', caller: 'Device/device-1' }),
    ]);
    expect(JSON.stringify(lines)).not.toMatch(/private|may not|Too many/);
  });

  test("the host's request id wins, then a well-formed client X-Request-Id; a malformed one is replaced", async () => {
    const fromHost = await request(app).post('/v1/chat/completions').set('x-host-request-id', 'medplum-1').set('X-Request-Id', 'client-1');
    expect(fromHost.headers['x-request-id']).toBe('medplum-1');
    const fromClient = await request(app).post('/v1/chat/completions').set('X-Request-Id', 'client-1');
    expect(fromClient.headers['x-request-id']).toBe('client-1');
    const malformed = await request(app).post('/v1/chat/completions').set('X-Request-Id', 'bad id\twith "quotes"');
    expect(malformed.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('a 5xx marks the span as an error', async () => {
    await request(app).get('/graphql').expect(503);
    expect(recorded.spans()[0].status.code).toBe(SpanStatusCode.ERROR);
  });

  test("the host's own routes pass through untouched: no id, no span, no metric, no log line", async () => {
    const response = await request(app).get('/fhir/R4/Patient').expect(200);
    expect(response.headers['x-request-id']).toBeUndefined();
    expect(response.body.requestId).toBeNull();
    expect(recorded.spans()).toEqual([]);
    expect(await recorded.points('fhirgate.http.server.request.duration')).toEqual([]);
    expect(lines).toEqual([]);
  });

  test("a route reads its request's span from the response, not from the active context (which Express's instrumentation changes)", async () => {
    const response = await request(app).get('/v1/models').expect(200);
    const [span] = recorded.spans();
    expect(span.name).toBe('GET /v1/models');
    expect(response.body.spanId).toBe(span.spanContext().spanId);
  });
});
