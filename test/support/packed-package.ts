/**
 * The package as users get it, for the tests that install it elsewhere: `npm pack` (its prepack builds dist/)
 * into a folder, and npm run with its whole output kept when it fails.
 */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

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

/** Packs this checkout into `folder`; returns the tarball's path. */
export async function packFhirgate(folder: string): Promise<string> {
  await runNpm(['pack', '--pack-destination', folder], process.cwd());
  const tarball = (await readdir(folder)).find((name) => name.endsWith('.tgz'));
  if (!tarball) {
    throw new Error('npm pack wrote no tarball');
  }
  return join(folder, tarball);
}
