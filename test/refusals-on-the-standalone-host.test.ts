/**
 * A standalone user's refusals, as they and the operator see them. Started as the README says for a real provider
 * (AI_PROVIDER, AI_API_BASE, AI_MODEL; no AI_PATIENT_DATA_MODELS), the host refuses a turn about a patient and names
 * the variable the user sets, AI_PATIENT_DATA_MODELS, not a plugin option the user never sees; its start-up warning
 * names it too. Each refused request's log line carries the error code and the caller's reference, so an operator
 * can tell who was refused and why without reproducing it, and never the token, the prompt or the message.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startHostProcess, until, type HostProcess } from './support/host-process.ts';

const run = promisify(execFile);

const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const DR_CARTER = 'Practitioner/a1f0c0de-0000-4000-8000-000000000201';
const MARIA_LOPEZ = 'a1f0c0de-0000-4000-8000-000000000301';
const PROMPT = 'Summarise the last visit of this patient';

interface LogLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

describe('refusals on the standalone host', () => {
  let emulator: LlmEmulator;
  let dataDir: string;
  let host: HostProcess;
  let token: string;

  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['echo'] });
    dataDir = await mkdtemp(join(tmpdir(), 'fhirgate-refusals-'));
    host = await startHostProcess({ FHIRGATE_DATA_DIR: dataDir, AI_PROVIDER: 'openai-compatible', AI_API_BASE: `${emulator.url}/v1`, AI_MODEL: 'echo', AI_PATIENT_DATA_MODELS: '' });
    token = await tokenCommand('');
  }, 120_000);

  afterAll(async () => {
    host?.child.kill('SIGTERM');
    await new Promise((resolve) => host?.child.once('exit', resolve));
    await emulator?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** `npm run -s token` with `flag`, run as the host's data folder needs it. */
  async function tokenCommand(flag: string): Promise<string> {
    const { stdout } = await run(process.execPath, ['plugin/hosts/standalone/print-token.ts', ...(flag ? [flag] : [])], { env: { ...process.env, FHIRGATE_DATA_DIR: dataDir } });
    return stdout.trim();
  }

  const lines = (): LogLine[] =>
    host
      .logs()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as LogLine);

  /** The request's `fhirgate request` line, once the host wrote it. */
  async function requestLine(requestId: string | null): Promise<LogLine> {
    await until(() => lines().some((line) => line.msg === 'fhirgate request' && line.requestId === requestId));
    const found = lines().find((line) => line.msg === 'fhirgate request' && line.requestId === requestId);
    if (!found) {
      throw new Error(`no log line for ${requestId}`);
    }
    return found;
  }

  const chat = (authorization: string, body: Record<string, unknown>): Promise<Response> =>
    fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: authorization, 'X-Project-ID': DEMO_PROJECT, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: PROMPT }], ...body }),
    });

  test('a turn about a patient on a model not cleared names AI_PATIENT_DATA_MODELS, as the user sets it; so does the start-up warning', async () => {
    const response = await chat(`Bearer ${token}`, { patient_id: MARIA_LOPEZ });
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    expect([response.status, error.code]).toEqual([403, 'patient_data_not_allowed']);
    expect(error.message).toContain("the server's operator has not cleared for it (AI_PATIENT_DATA_MODELS in the server's environment)");
    expect(error.message).not.toContain('llm.patientDataModels');

    const warning = lines().find((line) => line.msg.includes('NOT cleared for patient data'));
    expect(warning).toMatchObject({ level: 'WARN', models: ['openai-compatible/echo'] });
    expect(warning?.msg).toContain("(AI_PATIENT_DATA_MODELS in the server's environment)");
  });

  test("a refused request's log line has its code and the caller's reference, and no token, prompt or message", async () => {
    const refused = await chat(`Bearer ${token}`, { patient_id: MARIA_LOPEZ });
    const { error } = (await refused.json()) as { error: { message: string } };
    const line = await requestLine(refused.headers.get('x-request-id'));
    expect(line).toMatchObject({ level: 'INFO', status: 403, code: 'patient_data_not_allowed', caller: DR_CARTER, projectId: DEMO_PROJECT });
    const text = JSON.stringify(line);
    for (const secret of [token, PROMPT, error.message]) {
      expect(text).not.toContain(secret);
    }

    // A client's API key (`<client id>:<secret>`): the ClientApplication is the caller, its secret is in no line.
    const { client_id: clientId, client_secret: clientSecret } = JSON.parse(await tokenCommand('--client')) as { client_id: string; client_secret: string };
    const byClient = await chat(`Bearer ${clientId}:${clientSecret}`, { messages: [] });
    const { error: clientError } = (await byClient.json()) as { error: { code: string } };
    expect([byClient.status, clientError.code]).toEqual([400, 'invalid_request']);
    expect(await requestLine(byClient.headers.get('x-request-id'))).toMatchObject({ status: 400, code: 'invalid_request', caller: `ClientApplication/${clientId}` });

    // A stream the provider breaks after its first byte keeps its 200; its line has the in-band error's code.
    const broken = await chat(`Bearer ${token}`, { stream: true, messages: [{ role: 'user', content: 'Hello [emulator-behaviour {"streamErrorAfterTokens":2}]' }] });
    const events = await broken.text();
    const inBand = /"code":"([a-z_]+)"/.exec(events)?.[1];
    expect([broken.status, inBand]).toEqual([200, expect.any(String)]);
    expect(await requestLine(broken.headers.get('x-request-id'))).toMatchObject({ status: 200, code: inBand, caller: DR_CARTER });

    // Without a valid token there is no caller to name: the code alone.
    const unknown = await chat('Bearer not-a-token', {});
    const unauthenticated = await requestLine(unknown.headers.get('x-request-id'));
    expect(unauthenticated).toMatchObject({ status: 401, code: 'unauthenticated' });
    expect(unauthenticated.caller).toBeUndefined();

    expect(host.logs()).not.toContain(clientSecret);
    expect(host.logs()).not.toContain(token);
  });
});
