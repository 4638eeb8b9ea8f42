/**
 * One host per data folder, and a host that says so when it cannot start or can no longer keep what it is sent, as
 * a new user meets it with `npm start`: a second host on the folder (after "port in use") is refused in one line
 * naming the folder and the host that holds it, and the token command's tokens keep working on the first; a host on
 * a taken port says so in one line and leaves nothing behind; a data folder deleted under a running host makes it
 * refuse every write with 503 and fail its health check.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startHostProcess, type HostProcess } from './support/host-process.ts';
import { createStandaloneHost } from '../plugin/hosts/standalone/create-standalone-host.ts';
import { createJsonLogger } from '../plugin/hosts/standalone/logger.ts';
import { openStandaloneStore } from '../plugin/hosts/standalone/open-store.ts';
import { startChatHost } from './support/chat-host.ts';

const run = promisify(execFile);

interface Finished {
  readonly code?: number;
  readonly stderr: string;
}

/** `npm start`'s entry point with `env`, to its exit (it is expected to refuse to start). */
async function startExpectingRefusal(env: Record<string, string>): Promise<Finished> {
  const finished = await run(process.execPath, ['plugin/hosts/standalone/main.ts'], { env: { ...process.env, LOG_LEVEL: 'info', AI_PROVIDER: '', ...env }, timeout: 60_000 }).then(
    ({ stderr }) => ({ code: 0, stderr }),
    (error: { code?: number; stderr?: string }) => ({ code: error.code, stderr: error.stderr ?? '' })
  );
  return finished;
}

/** The lines a person reads: not the JSON log lines. */
const plainLines = (stderr: string): string[] => stderr.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('{'));

describe('the data folder and the port of a standalone host process', () => {
  let dataDir: string;
  let first: HostProcess;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-data-folder-'));
    // No base URL: the issuer is http://localhost:<port>/, as for a new user's `npm start`.
    first = await startHostProcess({ FHIRGATE_DATA_DIR: dataDir, AI_PROVIDER: '' });
  }, 120_000);

  afterAll(async () => {
    first.child.kill('SIGTERM');
    await new Promise((resolve) => first.child.once('exit', resolve));
    await rm(dataDir, { recursive: true, force: true });
  });

  test('a second host on the same folder is refused in one line naming the folder and the holder; tokens keep working', async () => {
    const recorded = readFileSync(join(dataDir, 'host.json'), 'utf8');

    const second = await startExpectingRefusal({ FHIRGATE_DATA_DIR: dataDir, PORT: '0' });

    expect(second.code).toBe(1);
    expect(plainLines(second.stderr)).toEqual([
      `fhirgate cannot start: the data folder ${dataDir} is in use by fhirgate, pid ${first.child.pid}, listening on ${first.url}. Stop it, or give this one a data folder of its own (FHIRGATE_DATA_DIR=<folder>).`,
    ]);
    expect(readFileSync(join(dataDir, 'host.json'), 'utf8')).toBe(recorded);
    const { stdout: token } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts'], { env: { ...process.env, FHIRGATE_DATA_DIR: dataDir } });
    expect((await fetch(`${first.url}fhir/R4/Patient`, { headers: { Authorization: `Bearer ${token.trim()}` } })).status).toBe(200);
  }, 120_000);

  test('a host on a port in use says so in one line with the PORT to use, exits 1, and leaves nothing behind', async () => {
    const port = new URL(first.url).port;
    const fresh = await mkdtemp(join(tmpdir(), 'fhirgate-taken-port-'));
    try {
      const refused = await startExpectingRefusal({ FHIRGATE_DATA_DIR: fresh, PORT: port });

      expect(refused.code).toBe(1);
      expect(plainLines(refused.stderr)).toEqual([
        `fhirgate cannot start: port ${port} on 127.0.0.1 is already in use (by another fhirgate, or another program). Stop it, or start this one on another port: PORT=${Number(port) + 1} npm start`,
      ]);
      expect(refused.stderr).not.toContain('    at ');
      // Not a journal folder, not a lock, not a store: the data folder was never touched.
      expect(readdirSync(fresh)).toEqual([]);
    } finally {
      await rm(fresh, { recursive: true, force: true });
    }
  }, 120_000);
});

test('a host that cannot listen (the port taken after the check) leaves no reply journal folder once closed', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-listen-failed-'));
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const store = openStandaloneStore(dataDir);
  try {
    const host = await createStandaloneHost({ store, baseUrl: 'http://localhost:8103/', logger: createJsonLogger('silent'), plugin: { replyJournalDir: join(dataDir, 'journal') } });
    expect(readdirSync(join(dataDir, 'journal'))).toHaveLength(1);

    await expect(host.listen((taken.address() as AddressInfo).port)).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await host.close({ graceMs: 0 });

    expect(readdirSync(join(dataDir, 'journal'))).toEqual([]);
  } finally {
    store.close();
    taken.close();
    await rm(dataDir, { recursive: true, force: true });
  }
});

describe('a data folder deleted under a running host', () => {
  test('chat and FHIR writes are refused with 503 unavailable, never acknowledged; the health check fails', async () => {
    const chatHost = await startChatHost();
    const { host } = chatHost;
    try {
      const project = await host.seedProject();
      const token = await host.accessTokenFor(project.ids['practitioner-membership']);
      const chat = (): Promise<Response> =>
        fetch(`${host.url}v1/chat/completions`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId },
          body: JSON.stringify({ messages: [{ role: 'user', content: 'Is this kept?' }] }),
        });
      expect((await fetch(`${host.url}healthcheck`)).status).toBe(200);

      await rm(host.dataDir, { recursive: true, force: true });

      const health = await fetch(`${host.url}healthcheck`);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({ ok: false, store: false });
      // Not a 401: the caller is who they were; the store is what failed.
      const turn = await chat();
      expect(turn.status).toBe(503);
      expect(await turn.json()).toEqual({ error: { message: expect.stringMatching(/file was deleted while the server ran/), type: expect.any(String), code: 'unavailable', param: null } });
      const write = await fetch(`${host.url}fhir/R4/Patient`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/fhir+json', Authorization: `Bearer ${token}` },
        body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Kept' }] }),
      });
      expect(write.status).toBe(503);
      expect(await write.json()).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'transient' }] });
    } finally {
      await chatHost.close();
    }
  });
});
