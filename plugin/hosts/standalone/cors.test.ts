import express from 'express';
import request from 'supertest';
import { createCorsMiddleware, parseAllowedOrigins, type AllowedOrigins } from './cors.ts';

function appAllowing(allowedOrigins: AllowedOrigins): express.Express {
  const app = express();
  app.use(createCorsMiddleware(allowedOrigins));
  app.all('/{*path}', (_request, response) => {
    response.json({ served: true });
  });
  return app;
}

describe('CORS as Medplum answers it', () => {
  const app = appAllowing(['http://localhost:3000']);

  test('an allowed origin is echoed, with credentials and the headers a client reads', async () => {
    const response = await request(app).get('/fhir/R4/Patient').set('Origin', 'http://localhost:3000');
    expect(response.status).toBe(200);
    expect(response.headers['access-control-allow-origin']).toBe('http://localhost:3000');
    expect(response.headers['access-control-allow-credentials']).toBe('true');
    expect(response.headers['access-control-expose-headers']).toBe('Content-Location,ETag,Last-Modified,Location,RateLimit');
    expect(response.headers.vary).toContain('Origin');
  });

  test("a preflight is answered 204 with the methods and the headers the browser asked for, and goes no further", async () => {
    const response = await request(app)
      .options('/auth/login')
      .set('Origin', 'http://localhost:3000')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization,content-type');
    expect(response.status).toBe(204);
    expect(response.headers['access-control-allow-methods']).toBe('GET,HEAD,PUT,PATCH,POST,DELETE');
    expect(response.headers['access-control-allow-headers']).toBe('authorization,content-type');
    expect(response.headers['access-control-max-age']).toBe('600');
    expect(response.body).toEqual({});
  });

  test('another origin gets no CORS header, and its preflight is not answered', async () => {
    const answer = await request(app).get('/fhir/R4/Patient').set('Origin', 'https://elsewhere.example');
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    const preflight = await request(app).options('/fhir/R4/Patient').set('Origin', 'https://elsewhere.example').set('Access-Control-Request-Method', 'GET');
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.headers['access-control-allow-methods']).toBeUndefined();
  });

  test("fhirgate's own routes take no part, as in a Medplum server", async () => {
    for (const path of ['/v1/chat/completions', '/graphql', '/healthcheck']) {
      const response = await request(app).get(path).set('Origin', 'http://localhost:3000');
      expect(response.headers['access-control-allow-origin']).toBeUndefined();
    }
  });

  test('with no origins allowed (the default) nothing changes; with * every origin is echoed', async () => {
    const none = await request(appAllowing([])).get('/fhir/R4/metadata').set('Origin', 'http://localhost:3000');
    expect(none.headers['access-control-allow-origin']).toBeUndefined();
    const any = await request(appAllowing('*')).get('/oauth2/token').set('Origin', 'https://app.example.org');
    expect(any.headers['access-control-allow-origin']).toBe('https://app.example.org');
  });
});

describe('FHIRGATE_ALLOWED_ORIGINS', () => {
  test('reads *, a list of origins, or nothing', () => {
    expect(parseAllowedOrigins('*', 'V')).toBe('*');
    expect(parseAllowedOrigins(' http://localhost:3000, https://app.example.org:8443 ', 'V')).toEqual(['http://localhost:3000', 'https://app.example.org:8443']);
    expect(parseAllowedOrigins(undefined, 'V')).toEqual([]);
  });

  test('an entry that is not an origin is refused, naming what to write', () => {
    expect(() => parseAllowedOrigins('http://localhost:3000/', 'V')).toThrow("V: 'http://localhost:3000/' is not an origin (a browser sends no path or trailing slash); write http://localhost:3000");
    expect(() => parseAllowedOrigins('localhost:3000', 'V')).toThrow("V: 'localhost:3000' is not an origin; write it as scheme://host[:port]");
    expect(() => parseAllowedOrigins('app.example.org', 'V')).toThrow('is not an origin');
  });
});
