/**
 * The built app is React's production build whatever environment builds it (the browser tests build it from
 * jest, whose NODE_ENV is `test`), and its first load stays within the budget of 500 KB of JavaScript (gzip).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { buildWebAppAgain } from '../support/web-app-build.ts';

const OUT = fileURLToPath(new URL('../../dist/web/', import.meta.url));

test('the app is built for production, and its first load is at most 500 KB of JavaScript (gzip)', async () => {
  expect(process.env.NODE_ENV).toBe('test');
  // A build left by an earlier run could be of either kind: build anew from this environment.
  await buildWebAppAgain();
  const page = readFileSync(join(OUT, 'index.html'), 'utf8');
  const scripts = [...page.matchAll(/src="\.\/(assets\/[^"]+\.js)"/g)].map((match) => match[1]);
  expect(scripts.length).toBeGreaterThan(0);
  const all = readdirSync(join(OUT, 'assets')).filter((file) => file.endsWith('.js'));
  for (const file of all) {
    // React's development build warns of this; the production build has no such text.
    expect(readFileSync(join(OUT, 'assets', file), 'utf8')).not.toContain('You are likely explicitly calling React.jsxs or React.jsxDEV');
  }
  const firstLoad = scripts.reduce((sum, file) => sum + gzipSync(readFileSync(join(OUT, file))).length, 0);
  expect(firstLoad).toBeLessThanOrEqual(500 * 1000);
}, 300_000);
