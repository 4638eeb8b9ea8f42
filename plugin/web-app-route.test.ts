import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import request from 'supertest';
import { createWebAppRoute } from './web-app-route.ts';

describe('the web app route', () => {
  let built: string;

  beforeAll(async () => {
    built = `${await mkdtemp(join(tmpdir(), 'fhirgate-web-'))}/`;
    await mkdir(join(built, 'assets'));
    await writeFile(join(built, 'index.html'), '<!doctype html><title>fhirgate</title>');
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
    const bare = await request(app).get('/fhirgate/app?x=1');
    expect([bare.status, bare.headers.location]).toEqual([308, '/fhirgate/app/?x=1']);
  });

  it('says how to build the app when it is not built', async () => {
    const app = express().use(createWebAppRoute(undefined, join(built, 'nothing/')));
    const page = await request(app).get('/fhirgate/app/');
    expect(page.status).toBe(503);
    expect(page.text).toContain('npm run build:web');
  });
});
