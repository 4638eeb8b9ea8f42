/**
 * A project's own models and provider keys, set where Medplum keeps them (Project.setting and Project.secret),
 * end to end: the openai SDK sees the project's model list and default, the provider receives the project's
 * key, other projects keep the operator's, and the key never lands in a stored record.
 */
import { MedplumClient } from '@medplum/core';
import type { Communication, Project } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { fingerprintOf, startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';

const OPERATOR_KEY = 'sk-operator-key-0001';
const PROJECT_KEY = 'sk-project-key-7777';

describe('per-project models and keys', () => {
  let emulator: LlmEmulator;
  let host: TestHost;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: {
            openai: { kind: 'openai', apiKey: OPERATOR_KEY, baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini', 'gpt-4o'] },
            claude: { kind: 'anthropic', baseUrl: emulator.url, models: ['claude-sonnet-5-5'] },
          },
          defaultModel: 'openai/gpt-4o-mini',
        },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(() => {
    emulator.reset();
  });

  async function practitionerClient(project: SeededProject): Promise<OpenAI> {
    return new OpenAI({
      baseURL: `${host.url}v1`,
      apiKey: await host.accessTokenFor(project.ids['practitioner-membership']),
      defaultHeaders: { 'X-Project-ID': project.projectId },
      maxRetries: 0,
    });
  }

  /** A completion that names no model, so the project's default answers. */
  async function ask(openai: OpenAI, content: string): Promise<OpenAI.ChatCompletion> {
    const body = { messages: [{ role: 'user', content }] } as OpenAI.ChatCompletionCreateParamsNonStreaming;
    return openai.chat.completions.create(body);
  }

  async function configureProject(project: SeededProject, fields: Pick<Project, 'setting' | 'secret'>): Promise<void> {
    const stored = await host.store.readResource<Project>('Project', project.projectId);
    await host.store.updateResource<Project>({ ...stored, ...fields });
  }

  test("a project's AI_MODELS, AI_MODEL and AI_API_KEY_<NAME> decide the list, the default and the key", async () => {
    const project = await host.seedProject();
    await configureProject(project, {
      setting: [
        { name: 'AI_MODELS', valueString: 'openai/gpt-4.1, claude/claude-sonnet-5-5' },
        { name: 'AI_MODEL', valueString: 'claude/claude-sonnet-5-5' },
      ],
      secret: [{ name: 'AI_API_KEY_CLAUDE', valueString: PROJECT_KEY }],
    });
    const openai = await practitionerClient(project);

    const models = await openai.models.list();
    expect(models.data.map((model) => model.id)).toEqual(['openai/gpt-4.1', 'claude/claude-sonnet-5-5']);

    const completion = await ask(openai, 'Hello');
    expect(completion.model).toBe('claude/claude-sonnet-5-5');
    expect(emulator.received[0]).toMatchObject({ provider: 'anthropic', model: 'claude-sonnet-5-5', credentialFingerprint: fingerprintOf(PROJECT_KEY) });

    await openai.chat.completions.create({ model: 'openai/gpt-4.1', messages: [{ role: 'user', content: 'Hi' }] });
    expect(emulator.received[1]).toMatchObject({ provider: 'openai', model: 'gpt-4.1', credentialFingerprint: fingerprintOf(OPERATOR_KEY) });

    await expect(openai.chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Hi' }] })).rejects.toMatchObject({
      status: 400,
      error: { code: 'invalid_request', message: expect.stringContaining("'openai/gpt-4o'") },
    });
  });

  test('other projects keep the operator list and key; a provider without a key for the project is a 503', async () => {
    const configured = await host.seedProject();
    await configureProject(configured, { secret: [{ name: 'AI_API_KEY', valueString: PROJECT_KEY }] });
    const plain = await host.seedProject();

    await ask(await practitionerClient(configured), 'a');
    const openai = await practitionerClient(plain);
    expect((await openai.models.list()).data.map((model) => model.id)).toEqual(['openai/gpt-4o-mini', 'openai/gpt-4o', 'claude/claude-sonnet-5-5']);
    await ask(openai, 'b');

    expect(emulator.received.map((request) => request.credentialFingerprint)).toEqual([fingerprintOf(PROJECT_KEY), fingerprintOf(OPERATOR_KEY)]);
    const noKey = openai.chat.completions.create({ model: 'claude/claude-sonnet-5-5', messages: [{ role: 'user', content: 'c' }] });
    await expect(noKey).rejects.toMatchObject({ status: 503, error: { code: 'not_configured' } });
    expect(emulator.received).toHaveLength(2);
  });

  test('a project setting naming an unconfigured provider is a clear 503, and stores nothing', async () => {
    const project = await host.seedProject();
    await configureProject(project, { setting: [{ name: 'AI_MODELS', valueString: 'mistral/large' }] });
    const openai = await practitionerClient(project);

    const failed = ask(openai, 'Hello');
    await expect(failed).rejects.toMatchObject({
      status: 503,
      error: { code: 'not_configured', message: expect.stringContaining("AI_MODELS names 'mistral/large'") },
    });
    const medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
    expect(await medplum.searchResources('Communication', { _count: '10' }, { cache: 'no-cache' })).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test("the project's key never appears in a stored record or an error", async () => {
    const project = await host.seedProject();
    await configureProject(project, { secret: [{ name: 'AI_API_KEY_OPENAI', valueString: PROJECT_KEY }] });
    const openai = await practitionerClient(project);
    emulator.setBehaviour({ errorStatus: 401, errorMessage: 'Incorrect API key provided' });

    const failed = await ask(openai, 'Hello').catch((error: unknown) => error);
    expect(failed).toMatchObject({ status: 500 });
    expect(failed).toBeInstanceOf(OpenAI.APIError);
    expect(JSON.stringify((failed as InstanceType<typeof OpenAI.APIError>).error)).not.toContain(PROJECT_KEY);

    emulator.setBehaviour({});
    await ask(openai, 'Hello again');
    const stored = await host.store.searchResources<Communication>({ resourceType: 'Communication', count: 1000 });
    expect(stored.length).toBeGreaterThan(0);
    expect(JSON.stringify(stored)).not.toContain(PROJECT_KEY);
  });
});
