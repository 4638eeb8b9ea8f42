/**
 * `npm run build:web`: bundles the web app (plugin/web/) with Vite into dist/web/, then reports what a browser
 * loads first: the JavaScript and CSS the page names, gzip-compressed. With `--when-stale` (`npm start` runs it
 * first) it builds only when dist/web/ is missing or older than a source of the app or the lockfile, so a clean
 * clone's `npm start` serves the app, and later starts do not wait for a build.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SOURCE = join(ROOT, 'plugin/web');
const OUT = join(ROOT, 'dist/web');
/** Where a build is made before it is put in place: on dist/'s disk (a rename), outside what `npm pack` takes. */
const STAGING_ROOT = join(ROOT, 'node_modules/.cache/fhirgate-web-build');

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
  // Built beside, then put in place: a server (or a test) serving dist/web/ meanwhile keeps finding its files.
  mkdirSync(STAGING_ROOT, { recursive: true });
  const staging = mkdtempSync(join(STAGING_ROOT, 'web-'));
  try {
    await build({ configFile: join(SOURCE, 'vite.config.ts'), mode: 'production', build: { outDir: staging, emptyOutDir: true } });
    installBuild(staging, OUT);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return firstLoadSizes();
}

/**
 * Moves the build in `from` into `to` file by file, each by a rename (atomic: a reader gets the old file or the new,
 * whole), the page last so that it names only files already there; then removes the files the new build no longer
 * has. Vite's own `emptyOutDir` would leave a served page without its scripts until the build ends.
 */
function installBuild(from: string, to: string): void {
  const built = filesUnder(from);
  const page = 'index.html';
  for (const file of [...built.filter((name) => name !== page), page]) {
    mkdirSync(dirname(join(to, file)), { recursive: true });
    renameSync(join(from, file), join(to, file));
  }
  const kept = new Set(built);
  for (const file of filesUnder(to).filter((name) => !kept.has(name))) {
    rmSync(join(to, file), { force: true });
  }
}

/** The files under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  return existsSync(dir)
    ? readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    : [];
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
