/**
 * A new user's `npm run -s token`, as the README runs it, against a host started with another PORT and data
 * folder than the defaults: the token it prints is one the host accepts, and pointed at a folder without a host's
 * data it says what to pass instead of making a store there.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startHostProcess, type HostProcess } from './support/host-process.ts';
import { usersShell } from './support/users-shell.ts';

const run = promisify(execFile);

describe('npm run -s token', () => {
  let dataDir: string;
  let host: HostProcess;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-token-'));
    // A port of its own, and no FHIRGATE_BASE_URL: the tokens' issuer is http://localhost:<that port>/.
    host = await startHostProcess({ FHIRGATE_DATA_DIR: dataDir, PORT: '0' });
  }, 120_000);

  afterAll(async () => {
    host.child.kill('SIGTERM');
    await new Promise((resolve) => host.child.once('exit', resolve));
    await rm(dataDir, { recursive: true, force: true });
  });

  const token = (environment: Record<string, string>) =>
    run('npm', ['run', '-s', 'token'], { env: { ...usersShell(), ...environment } }).catch((error: { code?: number; stdout?: string; stderr?: string }) => error);

  test("with the host's data folder only (not its PORT), the token is accepted", async () => {
    const { stdout } = (await token({ FHIRGATE_DATA_DIR: dataDir })) as { stdout: string };
    const response = await fetch(`${host.url}fhir/R4/Patient`, { headers: { Authorization: `Bearer ${stdout.trim()}` } });
    expect(response.status).toBe(200);
  });

  test('with a data folder the host never used, it says what to pass, exits 2, and creates nothing there', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'fhirgate-token-empty-'));
    try {
      const failure = (await token({ FHIRGATE_DATA_DIR: empty })) as { code?: number; stderr?: string };
      expect(failure.code).toBe(2);
      expect(failure.stderr).toContain(`No fhirgate data in ${empty}`);
      expect(failure.stderr).toContain('FHIRGATE_DATA_DIR=<folder> npm run -s token');
      expect(existsSync(join(empty, 'fhirgate.sqlite'))).toBe(false);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
