import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import request from 'supertest';
import { createWebAppRoute, WEB_APP_CONTENT_SECURITY_POLICY } from './web-app-route.ts';

describe('the web app route', () => {
  let built: string;

  beforeAll(async () => {
    built = `${await mkdtemp(join(tmpdir(), 'fhirgate-web-'))}/`;
    await mkdir(join(built, 'assets'));
    await writeFile(join(built, 'index.html'), '<!doctype html><html><head><title>fhirgate</title><script src="./assets/index-abc.js"></script></head></html>');
    await writeFile(join(built, 'assets', 'index-abc.js'), 'console.log(1);');
  });

  afterAll(async () => {
    await rm(built, { recursive: true, force: true });
  });

  it('serves the page for any path of the app, its assets for good, and adds the slash the page needs', async () => {
    const app = express().use(createWebAppRoute(undefined, built));
    const page = await request(app).get('/fhirgate/app/chat');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<title>fhirgate</title>');
    expect(page.headers['cache-control']).toBe('no-cache');
    const asset = await request(app).get('/fhirgate/app/assets/index-abc.js');
    expect(asset.headers['cache-control']).toContain('immutable');
    expect((await request(app).get('/fhirgate/app/assets/missing.js')).status).toBe(404);
    // A deep link's page resolves its relative asset URLs against the app's path, under any mount prefix.
    expect((await request(app).get('/fhirgate/app/review/conversations/123')).text).toContain('<head><base href="/fhirgate/app/">');
    const prefixed = express().use('/api', createWebAppRoute(undefined, built));
    expect((await request(prefixed).get('/api/fhirgate/app/chat')).text).toContain('<base href="/api/fhirgate/app/">');
    const bare = await request(app).get('/fhirgate/app?x=1');
    expect([bare.status, bare.headers.location]).toEqual([308, '/fhirgate/app/?x=1']);
  });

  it('gives the app a policy of its own in place of a server policy that blocks every script and style (as Medplum’s)', async () => {
    // As Medplum's `standardHeaders`, which runs before every route of its server.
    const medplumPolicy = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none';";
    const app = express()
      .use((_request, response, next) => {
        response.set('Content-Security-Policy', medplumPolicy);
        response.set('Cache-Control', 'no-store, no-cache, must-revalidate');
        response.set('Pragma', 'no-cache');
        next();
      })
      .use(createWebAppRoute(undefined, built))
      .get('/fhir/R4/metadata', (_request, response) => response.json({}));
    for (const path of ['/fhirgate/app/', '/fhirgate/app/review', '/fhirgate/app/assets/index-abc.js']) {
      const response = await request(app).get(path);
      expect([path, response.headers['content-security-policy']]).toEqual([path, WEB_APP_CONTENT_SECURITY_POLICY]);
    }
    expect(WEB_APP_CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(WEB_APP_CONTENT_SECURITY_POLICY).toContain("base-uri 'self'");
    expect(WEB_APP_CONTENT_SECURITY_POLICY).toContain("frame-ancestors 'none'");
    // The server's own routes keep the server's policy.
    expect((await request(app).get('/fhir/R4/metadata')).headers['content-security-policy']).toBe(medplumPolicy);
  });

  it('lets the browser keep the app’s files under a server that forbids caching everything (as Medplum does)', async () => {
    const app = express()
      .use((_request, response, next) => {
        response.set('Cache-Control', 'no-store, no-cache, must-revalidate');
        response.set('Pragma', 'no-cache');
        next();
      })
      .use(createWebAppRoute(undefined, built));
    const asset = await request(app).get('/fhirgate/app/assets/index-abc.js');
    expect(asset.status).toBe(200);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(asset.headers.pragma).toBeUndefined();
    // The page is asked for again each time, so a new build reaches the browser at its next visit.
    expect((await request(app).get('/fhirgate/app/chat')).headers['cache-control']).toBe('no-cache');
  });

  it('says how to build the app when it is not built', async () => {
    const app = express().use(createWebAppRoute(undefined, join(built, 'nothing/')));
    const page = await request(app).get('/fhirgate/app/');
    expect(page.status).toBe(503);
    expect(page.text).toContain('npm run build:web');
  });
});
