/**
 * Building again (`npm run build`, as `npm pack` does, and `npm run build:web`) while a server serves the app: a
 * browser loading the page meanwhile gets the page and every file it names. The build leaves dist/web/ in place
 * (scripts/clean-dist.ts) and puts the app's new build there file by file (scripts/build-web-app.ts); emptied first,
 * as `prebuild` and Vite did, the page's scripts were missing for the whole build and the page stayed blank.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createWebAppRoute } from '../../plugin/web-app-route.ts';
import { buildFhirgate } from '../support/packed-package.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';

test('a server serving the app keeps serving the page and all its files while fhirgate is built again', async () => {
  await ensureWebAppBuilt();
  const server = express().use(createWebAppRoute(undefined)).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/fhirgate/app/`;
  try {
    const page = await (await fetch(appUrl)).text();
    const files = [...page.matchAll(/(?:src|href)="\.\/(assets\/[^"]+)"/g)].map((match) => match[1]);
    expect(files.length).toBeGreaterThan(1);

    let building = true;
    const build = buildFhirgate().finally(() => {
      building = false;
    });
    const answers = new Map<string, number>();
    let loads = 0;
    while (building) {
      for (const file of files) {
        const response = await fetch(`${appUrl}${file}`);
        await response.arrayBuffer();
        answers.set(`${file} ${response.status}`, (answers.get(`${file} ${response.status}`) ?? 0) + 1);
      }
      loads += 1;
    }
    await build;
    // Loaded again and again for the whole build, and every time whole.
    expect(loads).toBeGreaterThan(5);
    expect([...answers.keys()].sort()).toEqual(files.map((file) => `${file} 200`).sort());
  } finally {
    server.close();
  }
}, 120_000);
