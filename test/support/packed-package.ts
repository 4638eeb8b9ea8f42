/**
 * The package as users get it, for the tests that install it elsewhere: `npm pack` (its prepack builds dist/)
 * into a folder, and npm run with its whole output kept when it fails.
 */
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
/** Held while this checkout's dist/ is built (each pack builds it). */
const BUILD_LOCK = join(process.cwd(), 'node_modules/.cache/fhirgate-pack.lock');

/** Runs npm in `cwd`; a failure carries its whole output (tsc reports a failed build on stdout). */
export async function runNpm(args: readonly string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await run('npm', [...args], { cwd, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`npm ${args.join(' ')} failed:\n${stdout ?? ''}\n${stderr ?? ''}`);
  }
}

/**
 * Packs this checkout into `folder`; returns the tarball's path. One pack at a time across the suite's workers: each
 * builds dist/ again (prepack), and tsc rewrites its files in place, which another pack could take half written.
 */
export async function packFhirgate(folder: string): Promise<string> {
  await oneAtATime(BUILD_LOCK, () => runNpm(['pack', '--pack-destination', folder], process.cwd()));
  const tarball = (await readdir(folder)).find((name) => name.endsWith('.tgz'));
  if (!tarball) {
    throw new Error('npm pack wrote no tarball');
  }
  return join(folder, tarball);
}

/** `npm run build` in this checkout, one build (or pack) at a time across the suite's workers. */
export async function buildFhirgate(): Promise<void> {
  await oneAtATime(BUILD_LOCK, () => runNpm(['run', 'build'], process.cwd()));
}

/**
 * Runs `work` holding the lock `path` (a folder: made atomically, by one process only), waiting for it meanwhile; a
 * lock whose holder is gone (its pid, written inside, no longer runs) is taken over.
 */
async function oneAtATime<T>(path: string, work: () => Promise<T>): Promise<T> {
  await mkdir(dirname(path), { recursive: true });
  for (;;) {
    try {
      await mkdir(path);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw error;
      }
      const holder = Number(await readFile(join(path, 'pid'), 'utf8').catch(() => ''));
      if (holder > 0 && !isRunning(holder)) {
        await rm(path, { recursive: true, force: true });
        continue;
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  try {
    await writeFile(join(path, 'pid'), String(process.pid));
    return await work();
  } finally {
    await rm(path, { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
