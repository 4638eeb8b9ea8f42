/**
 * The examples, run as a user runs them against a listening host. The README's round trip: `npm run -s example` from
 * a shell whose Node is the user's own (the machine's, which may be older than the project's), with a token and
 * client credentials as `npm run -s token` prints them. The Python examples with the machine's `python3`: the `openai`
 * SDK's script only compiled (the SDK is not on the registries CI reaches), and its requests run by the script that
 * makes them with Python's standard library.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { MedplumClient } from '@medplum/core';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { usersShell } from './support/users-shell.ts';

const run = promisify(execFile);

/** The machine's Python 3, where there is one: the Python examples are checked with it, and skipped without it. */
const hasPython = spawnSync('python3', ['--version']).status === 0;
const withPython = hasPython ? test : test.skip;

describe('examples', () => {
  let emulator: LlmEmulator;
  let host: TestHost;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: { openai: { kind: 'openai', apiKey: 'sk-example', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'] } },
          defaultModel: 'openai/gpt-4o-mini',
          // The emulator answers on loopback: cleared for patient data (the example's conversation is about a patient).
          patientDataModels: ['openai/*'],
        },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  test('round-trip.ts: asks, continues the conversation streaming, and lists the stored records in order', async () => {
    const project = await host.seedProject();
    // The README's line, as written after its two settings (which the test gives from its own host).
    const readme = await readFile('README.md', 'utf8');
    const command = /^TOKEN=\$\(npm run -s token\) CLIENT=\$\(npm run -s token -- --client\) (.+)$/m.exec(readme)?.[1];
    expect(command).toBeDefined();
    const { stdout } = await run('sh', ['-c', command ?? 'false'], {
      env: {
        ...usersShell(),
        FHIRGATE_URL: host.url,
        TOKEN: await host.accessTokenFor(project.ids['practitioner-membership']),
        CLIENT: JSON.stringify({ client_id: project.client?.id, client_secret: project.client?.secret, project_id: project.projectId }),
        PATIENT_ID: project.ids['patient-in-care-team-1'],
      },
    });

    expect(stdout).toContain('answer:        Echo: What should I check at the next visit?');
    expect(stdout).toContain('streamed:      Echo: And which labs?');
    const records = stdout.split('\n').filter((line) => / ai-(prompt|response) /.test(line));
    expect(records.map((line) => line.split(/\s+/).slice(1, 3).join(' '))).toEqual([
      'ai-prompt completed',
      'ai-response completed',
      'ai-prompt completed',
      'ai-response completed',
    ]);
    expect(records[1]).toContain('Device/');
    expect(records[3]).toContain('Echo: And which labs?');
    // The continued turn was sent with the first turn's system message (it brought none of its own), the patient's
    // context and the first exchange as history.
    expect(emulator.received[1].messages.map((message) => message.role)).toEqual(['system', 'system', 'user', 'assistant', 'user']);
    expect(emulator.received[1].messages[0].content).toBe('You are a careful clinical assistant.');
  });

  withPython('python-openai.py and python-http.py compile; python-http.py makes the SDK script\'s requests: chat, a continued stream, a Responses chain', async () => {
    // Compiled into a folder of the test's own, so no __pycache__ is left in examples/.
    const cache = await mkdtemp(join(tmpdir(), 'fhirgate-python-'));
    try {
      await run('python3', ['-m', 'py_compile', 'examples/python-openai.py', 'examples/python-http.py'], { env: { ...process.env, PYTHONPYCACHEPREFIX: cache } });
    } finally {
      await rm(cache, { recursive: true, force: true });
    }
    const project = await host.seedProject();
    emulator.reset();
    const { stdout } = await run('python3', ['-B', 'examples/python-http.py'], {
      env: {
        ...usersShell(),
        FHIRGATE_URL: host.url,
        TOKEN: await host.accessTokenFor(project.ids['practitioner-membership']),
        PROJECT_ID: project.projectId,
        PATIENT_ID: project.ids['patient-in-care-team-1'],
      },
    });

    const conversationId = /^conversation: {2}(\S+)$/m.exec(stdout)?.[1];
    expect(stdout).toContain('answer:        Echo: What should I check at the next visit?\n');
    expect(stdout).toContain('streamed:      Echo: And which labs?\n');
    expect(stdout).toContain('response:      Echo: Remember 7.\ncontinued:     Echo: And 8?\nsame thread:   True\n');
    // The stream continued the conversation: the first turn's system message went to the model again (the stream
    // brings none of its own), then the patient's chart, then the first exchange as history.
    expect(emulator.received[1].messages.slice(0, 2)).toEqual([
      { role: 'system', content: 'You are a careful clinical assistant.' },
      { role: 'system', content: expect.stringContaining('<patient-chart>') },
    ]);
    expect(emulator.received[1].messages.slice(-3)).toEqual([
      { role: 'user', content: 'What should I check at the next visit?' },
      { role: 'assistant', content: 'Echo: What should I check at the next visit?' },
      { role: 'user', content: 'And which labs?' },
    ]);
    expect(emulator.received[3].messages).toEqual([
      { role: 'user', content: 'Remember 7.' },
      { role: 'assistant', content: 'Echo: Remember 7.' },
      { role: 'user', content: 'And 8?' },
    ]);
    const medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
    const turns = await medplum.searchResources('Communication', { 'part-of': `Communication/${conversationId}`, _sort: 'sent' });
    expect(turns.map((turn) => [turn.category?.[0]?.coding?.[0]?.code, turn.subject?.reference])).toEqual([
      ['ai-prompt', `Patient/${project.ids['patient-in-care-team-1']}`],
      ['ai-response', `Patient/${project.ids['patient-in-care-team-1']}`],
      ['ai-prompt', `Patient/${project.ids['patient-in-care-team-1']}`],
      ['ai-response', `Patient/${project.ids['patient-in-care-team-1']}`],
    ]);
  });
});
