/**
 * The README's round trip, run as a user runs it: `npm run -s example` from a shell whose Node is the user's own
 * (the machine's, which may be older than the project's), against a listening host, with a token and client
 * credentials as `npm run -s token` prints them.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { usersShell } from './support/users-shell.ts';

const run = promisify(execFile);

describe('examples/round-trip.ts', () => {
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

  test('asks, continues the conversation streaming, and lists the stored records in order', async () => {
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
});

