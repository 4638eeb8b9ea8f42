/**
 * `npm run build:web`: bundles the web app (plugin/web/) with Vite into dist/web/, then reports what a browser
 * loads first: the JavaScript and CSS the page names, gzip-compressed. With `--when-stale` (`npm start` runs it
 * first) it builds only when dist/web/ is missing or older than a source of the app or the lockfile, so a clean
 * clone's `npm start` serves the app, and later starts do not wait for a build.
 */
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SOURCE = join(ROOT, 'plugin/web');
const OUT = join(ROOT, 'dist/web');

/** Newest modification time of the app's sources (and the lockfile, which decides the packages bundled). */
function newestSource(): number {
  const files = readdirSync(SOURCE, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
  return Math.max(...[...files, join(ROOT, 'package-lock.json')].map((file) => statSync(file).mtimeMs));
}

/** Whether dist/web/ holds a build at least as new as every source. */
export function webAppIsBuilt(): boolean {
  const page = join(OUT, 'index.html');
  return existsSync(page) && statSync(page).mtimeMs >= newestSource();
}

/** Builds the app into dist/web/ and returns the gzip size of what its page loads first, by kind. */
export async function buildWebApp(): Promise<{ javascriptBytes: number; cssBytes: number }> {
  // Always React's production build: Vite keeps a NODE_ENV it inherits (jest's `test`, a shell's `development`),
  // and React's development build renders a streamed reply several times slower and weighs twice as much.
  process.env.NODE_ENV = 'production';
  await build({ configFile: join(SOURCE, 'vite.config.ts'), mode: 'production' });
  return firstLoadSizes();
}

function firstLoadSizes(): { javascriptBytes: number; cssBytes: number } {
  const page = readFileSync(join(OUT, 'index.html'), 'utf8');
  const named = [...page.matchAll(/(?:src|href)="\.\/(assets\/[^"]+)"/g)].map((match) => match[1]);
  const gzipped = (suffix: string): number =>
    named.filter((file) => file.endsWith(suffix)).reduce((sum, file) => sum + gzipSync(readFileSync(join(OUT, file))).length, 0);
  return { javascriptBytes: gzipped('.js'), cssBytes: gzipped('.css') };
}

if (import.meta.url === new URL(process.argv[1], 'file://').href) {
  if (process.argv.includes('--when-stale') && webAppIsBuilt()) {
    process.exit(0);
  }
  process.stdout.write('Building the web app (plugin/web/ → dist/web/)...\n');
  const sizes = await buildWebApp();
  const kib = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KiB`;
  process.stdout.write(`Web app built: first load ${kib(sizes.javascriptBytes)} of JavaScript and ${kib(sizes.cssBytes)} of CSS (gzip)\n`);
}
