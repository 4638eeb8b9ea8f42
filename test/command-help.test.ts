/**
 * fhirgate's commands as a user types them in a shell: `--help` prints the usage and exits 0; a flag the command
 * does not take is one line on stderr naming it, exit 2, and no stack trace.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openStandaloneStore } from '../plugin/hosts/standalone/open-store.ts';
import { usersShell } from './support/users-shell.ts';

const run = promisify(execFile);

interface Finished {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `command` in a user's shell; resolves whatever its exit code. */
async function runCommand(command: string, args: readonly string[], environment: NodeJS.ProcessEnv = {}): Promise<Finished> {
  try {
    const { stdout, stderr } = await run(command, [...args], { env: { ...usersShell(), ...environment }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

// Each command as the README and its docs run it; `-s` keeps npm's own banner out of the output.
const COMMANDS = [
  { name: 'npm run -s token', command: 'npm', args: ['run', '-s', 'token', '--'], usage: /^Usage: npm run -s token -- \[option\]/, prefix: 'fhirgate-token: ' },
  { name: 'npm run -s provision', command: 'npm', args: ['run', '-s', 'provision', '--'], usage: /^Usage: fhirgate provision --base-url/, prefix: 'fhirgate provision: ' },
  { name: 'npm run -s e2e', command: 'npm', args: ['run', '-s', 'e2e', '--'], usage: /^Usage: npm run e2e -- \[--base-url/, prefix: 'npm run e2e: ' },
  { name: 'npm start (fhirgate)', command: 'npm', args: ['start', '-s', '--'], usage: /^Usage: fhirgate /, prefix: 'fhirgate: ' },
] as const;

describe.each(COMMANDS)('$name', ({ command, args, usage, prefix }) => {
  test('--help prints its usage and exits 0', async () => {
    const { code, stdout, stderr } = await runCommand(command, [...args, '--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(usage);
    expect(stdout).toContain('--help');
    expect(stderr).toBe('');
  });

  test('an unknown flag is one line naming it, exit 2, no stack trace', async () => {
    const { code, stdout, stderr } = await runCommand(command, [...args, '--no-such-flag']);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toBe(`${prefix}Unknown option '--no-such-flag'; --help lists the options.\n`);
  });
});

describe('a wrong value is one line too', () => {
  test('a flag that needs a value, given none', async () => {
    const { code, stderr } = await runCommand('npm', ['run', '-s', 'provision', '--', '--base-url']);
    expect(code).toBe(2);
    expect(stderr).toBe("fhirgate provision: Option '--base-url <value>' argument missing; --help lists the options.\n");
  });

  test('a switch given a value', async () => {
    const { code, stderr } = await runCommand('npm', ['run', '-s', 'e2e', '--', '--repository-operations=yes']);
    expect(code).toBe(2);
    expect(stderr).toBe("npm run e2e: Option '--repository-operations' does not take an argument; --help lists the options.\n");
  });

  test('npm run -s token -- --membership with a membership the store does not hold', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-token-membership-'));
    try {
      // A data folder with a store, as a host leaves it (the command seeds the demo project itself).
      openStandaloneStore(dataDir).close();
      const { code, stdout, stderr } = await runCommand('npm', ['run', '-s', 'token', '--', '--membership', 'no-such-membership'], { FHIRGATE_DATA_DIR: dataDir });
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toBe(`fhirgate-token: no ProjectMembership 'no-such-membership' in ${dataDir}; --help lists the options.\n`);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
