/**
 * The web app, built for a browser test when `dist/web/` is missing or stale. The build runs in a process of its
 * own (`npm run build:web`'s script): Vite's bundler does not run inside jest's module sandbox, whose objects are
 * not the native binding's.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Builds the app unless its build is current. */
export async function ensureWebAppBuilt(): Promise<void> {
  await buildWebApp(['--when-stale']);
}

/**
 * Builds the app anew, current or not, and puts it in place while servers serve it (the build never leaves dist/web/
 * without the page or its files: other test files' servers serve it meanwhile).
 */
export async function buildWebAppAgain(): Promise<void> {
  await buildWebApp([]);
}

function buildWebApp(flags: readonly string[]): Promise<unknown> {
  return run(process.execPath, ['scripts/build-web-app.ts', ...flags], { maxBuffer: 16 * 1024 * 1024 });
}
