import { jest } from '@jest/globals';
import { runProvisionCommand } from './provision-command.ts';

/** Runs the command and collects what it printed. */
async function runCommand(args: string[], environment: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => ((out += String(chunk)), true));
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => ((err += String(chunk)), true));
  try {
    return { code: await runProvisionCommand(args, environment), out, err };
  } finally {
    stdout.mockRestore();
    stderr.mockRestore();
  }
}

describe('fhirgate provision, the command', () => {
  test('--help prints the usage', async () => {
    const { code, out } = await runCommand(['--help']);
    expect(code).toBe(0);
    expect(out).toMatch(/^Usage: fhirgate provision --base-url/);
  });

  test('without the server or credentials it says what is missing and exits 2', async () => {
    const { code, err } = await runCommand(['--base-url', 'http://127.0.0.1:1/']);
    expect(code).toBe(2);
    expect(err).toContain("a project administrator's client credentials");
  });

  test('an unknown flag is named', async () => {
    const { code, err } = await runCommand(['--base-ur', 'x']);
    expect(code).toBe(2);
    expect(err).toContain("'--base-ur'");
  });

  test('a server that cannot be reached fails with exit 1 and never prints the secret', async () => {
    const { code, out, err } = await runCommand(['--base-url', 'http://127.0.0.1:9/'], { MEDPLUM_CLIENT_ID: 'client', MEDPLUM_CLIENT_SECRET: 'the-secret-value' });
    expect(code).toBe(1);
    expect(err).toMatch(/^fhirgate provision failed: /);
    expect(`${out}${err}`).not.toContain('the-secret-value');
  });
});
