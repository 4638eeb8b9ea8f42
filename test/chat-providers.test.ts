/**
 * Every provider kind through the gateway: one host with an OpenAI, an Azure OpenAI, an Anthropic, an Ollama and
 * an OpenAI-compatible provider, all answered by one loopback emulator. The client is always the official openai
 * SDK; each kind must reach the emulator in its own wire format, answer in the spec's format, and leave the same
 * stored reply.
 */
import { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { REDACTED, fingerprintOf, startLlmEmulator, type LlmEmulator, type ProviderName, type ReceivedRequest } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { ProviderConfigInput } from '../plugin/llm/provider-config.ts';
import type { FhirgateCompletion } from './support/chat-clients.ts';

const AZURE_API_VERSION = '2024-10-21';
const AZURE_DEPLOYMENT = 'gpt-4o-prod';

/** One configured provider, and what the emulator should see when it is asked. */
interface ProviderCase {
  /** The provider's configured name: the `provider` of `provider/model`. */
  readonly name: string;
  readonly model: string;
  /** The provider's settings in the plugin's `llm` option, given the emulator's base URL. */
  readonly settings: (emulatorUrl: string) => ProviderSettingsInput;
  /** The wire format the emulator recognised. */
  readonly format: ProviderName;
  /** Request target at the emulator, query included. */
  readonly path: string;
  /** Where the request's max_tokens and temperature travel in that format. */
  readonly maxTokensOf: (body: Record<string, unknown>) => unknown;
  readonly temperatureOf: (body: Record<string, unknown>) => unknown;
  /** The header carrying the provider key; undefined for a provider configured without one. */
  readonly credentialHeader: string | undefined;
}

type ProviderSettingsInput = ProviderConfigInput['providers'][string];

const optionsOf = (body: Record<string, unknown>): Record<string, unknown> => (body.options ?? {}) as Record<string, unknown>;

const PROVIDERS: readonly ProviderCase[] = [
  {
    name: 'openai',
    model: 'gpt-4o-mini',
    settings: (url) => ({ kind: 'openai', apiKey: 'sk-test-openai', baseUrl: `${url}/v1`, models: ['gpt-4o-mini'] }),
    format: 'openai',
    path: '/v1/chat/completions',
    maxTokensOf: (body) => body.max_completion_tokens,
    temperatureOf: (body) => body.temperature,
    credentialHeader: 'authorization',
  },
  {
    name: 'azure',
    model: AZURE_DEPLOYMENT,
    settings: (url) => ({ kind: 'azure-openai', apiKey: 'test-azure-key', baseUrl: url, apiVersion: AZURE_API_VERSION, models: [AZURE_DEPLOYMENT] }),
    format: 'azure',
    path: `/openai/deployments/${AZURE_DEPLOYMENT}/chat/completions?api-version=${AZURE_API_VERSION}`,
    maxTokensOf: (body) => body.max_tokens,
    temperatureOf: (body) => body.temperature,
    credentialHeader: 'api-key',
  },
  {
    name: 'anthropic',
    model: 'claude-haiku-4-5',
    settings: (url) => ({ kind: 'anthropic', apiKey: 'sk-ant-test', baseUrl: url, models: ['claude-haiku-4-5'] }),
    format: 'anthropic',
    path: '/v1/messages',
    maxTokensOf: (body) => body.max_tokens,
    temperatureOf: (body) => body.temperature,
    // @anthropic-ai/sdk 1.12 sends its key as a bearer token (see test/emulator/README.md).
    credentialHeader: 'authorization',
  },
  {
    name: 'ollama',
    model: 'llama3.2',
    settings: (url) => ({ kind: 'ollama', baseUrl: url, models: ['llama3.2'] }),
    format: 'ollama',
    path: '/api/chat',
    maxTokensOf: (body) => optionsOf(body).num_predict,
    temperatureOf: (body) => optionsOf(body).temperature,
    credentialHeader: undefined,
  },
  {
    name: 'compat',
    model: 'qwen2.5-7b-instruct',
    settings: (url) => ({ kind: 'openai-compatible', apiKey: 'test-compat-key', baseUrl: `${url}/v1`, models: ['qwen2.5-7b-instruct'] }),
    format: 'openai',
    path: '/v1/chat/completions',
    maxTokensOf: (body) => body.max_tokens,
    temperatureOf: (body) => body.temperature,
    credentialHeader: 'authorization',
  },
];

const SYSTEM = 'You are a terse clinical assistant.';
const QUESTION = 'Which vaccines are due this month?';
const REPLY = `Echo: ${QUESTION}`;
// The emulator counts words: the system message and the question are the prompt, the echoed question the reply.
const EXPECTED_USAGE = { prompt_tokens: 6 + 6, completion_tokens: 7, total_tokens: 19 };
const MAX_TOKENS = 256;
const TEMPERATURE = 0.3;

/** A completion with fhirgate's extra fields. */
/** A streamed chunk with fhirgate's extra fields. */
type FhirgateChunk = OpenAI.ChatCompletionChunk & { conversation_id?: string; communication_id?: string };

describe('chat gateway with every provider kind', () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: Object.fromEntries(PROVIDERS.map((provider) => [provider.name, provider.settings(emulator.url)])),
          defaultModel: 'openai/gpt-4o-mini',
        },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(async () => {
    emulator.reset();
    project = await host.seedProject();
    openai = new OpenAI({
      baseURL: `${host.url}v1`,
      apiKey: await host.accessTokenFor(project.ids['practitioner-membership']),
      defaultHeaders: { 'X-Project-ID': project.projectId },
      maxRetries: 0,
    });
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  });

  const request = {
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: QUESTION },
    ],
    max_tokens: MAX_TOKENS,
    temperature: TEMPERATURE,
  } satisfies Omit<OpenAI.ChatCompletionCreateParams, 'model'>;

  /** Checks the one request the emulator received against the provider's wire format. */
  function expectProviderCall(provider: ProviderCase, stream: boolean): void {
    expect(emulator.received).toHaveLength(1);
    const call: ReceivedRequest = emulator.received[0];
    expect(call).toMatchObject({ provider: provider.format, path: provider.path, model: provider.model, stream, outcome: 'completed' });
    expect(call.messages).toEqual([
      { role: 'system', content: SYSTEM },
      { role: 'user', content: QUESTION },
    ]);
    expect(provider.maxTokensOf(call.body)).toBe(MAX_TOKENS);
    expect(provider.temperatureOf(call.body)).toBe(TEMPERATURE);
    // Each provider gets its own key, in its own header; a provider configured without one gets none.
    const apiKey = provider.settings(emulator.url).apiKey;
    expect(call.credentialFingerprint).toBe(apiKey === undefined ? undefined : fingerprintOf(apiKey));
    if (provider.credentialHeader !== undefined) {
      expect(call.headers[provider.credentialHeader]).toBe(REDACTED);
    }
  }

  /** Reads the stored reply back and checks its payload, model and usage. */
  async function expectStoredReply(provider: ProviderCase, communicationId: string | undefined): Promise<void> {
    const reply: Communication = await medplum.readResource('Communication', communicationId ?? '', { cache: 'no-cache' });
    expect(reply.status).toBe('completed');
    expect(reply.payload).toEqual([{ contentString: REPLY }]);
    expect(reply.extension?.find((extension) => extension.url === EXTENSION.model)?.valueString).toBe(`${provider.name}/${provider.model}`);
    const usage = reply.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension ?? [];
    expect(Object.fromEntries(usage.map((item) => [item.url, item.valueInteger]))).toEqual({
      'prompt-tokens': EXPECTED_USAGE.prompt_tokens,
      'completion-tokens': EXPECTED_USAGE.completion_tokens,
      'total-tokens': EXPECTED_USAGE.total_tokens,
    });
  }

  test.each(PROVIDERS)('$name: a JSON completion reaches the provider in its own format and is stored', async (provider) => {
    const modelId = `${provider.name}/${provider.model}`;
    const completion = (await openai.chat.completions.create({ ...request, model: modelId })) as FhirgateCompletion;

    expect(completion.model).toBe(modelId);
    expect(completion.choices[0]).toMatchObject({ message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' });
    expect(completion.usage).toMatchObject(EXPECTED_USAGE);
    expectProviderCall(provider, false);
    await expectStoredReply(provider, completion.communication_id);
  });

  test.each(PROVIDERS)('$name: a streamed completion reaches the provider in its own format and is stored', async (provider) => {
    const modelId = `${provider.name}/${provider.model}`;
    const stream = await openai.chat.completions.create({ ...request, model: modelId, stream: true, stream_options: { include_usage: true } });
    const chunks: FhirgateChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
    }

    expect(chunks.every((chunk) => chunk.model === modelId)).toBe(true);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe(REPLY);
    const finish = chunks.find((chunk) => chunk.choices[0]?.finish_reason);
    expect(finish?.choices[0].finish_reason).toBe('stop');
    expect(chunks.at(-1)?.usage).toMatchObject(EXPECTED_USAGE);
    expectProviderCall(provider, true);
    await expectStoredReply(provider, finish?.communication_id);
  });

  test('GET /v1/models lists every provider model as provider/model', async () => {
    const models = await openai.models.list();
    expect(models.data.map((model) => model.id)).toEqual(PROVIDERS.map((provider) => `${provider.name}/${provider.model}`));
    expect(models.data.every((model) => model.object === 'model' && model.owned_by === 'fhirgate')).toBe(true);
  });

  test('GET /v1/models/{id} answers the model object, its slash sent encoded (as the SDK does) or as it is', async () => {
    // Not cleared for patient data on this host: the model object says so.
    const expected = { id: 'anthropic/claude-haiku-4-5', object: 'model', created: 0, owned_by: 'fhirgate', fhirgate: { patient_data: 'refused' } };
    expect(await openai.models.retrieve('anthropic/claude-haiku-4-5')).toEqual(expected);
    const headers = { Authorization: `Bearer ${openai.apiKey}`, 'X-Project-ID': project.projectId };
    for (const path of ['anthropic/claude-haiku-4-5', 'anthropic%2Fclaude-haiku-4-5']) {
      const response = await fetch(`${host.url}v1/models/${path}`, { headers });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual(expected);
    }
  });

  test('GET /v1/models/{id} of a model the project is not offered is 404 model_not_found; without a token, 401', async () => {
    const missing = await openai.models.retrieve('openai/gpt-5-turbo').catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ type: 'invalid_request_error', code: 'model_not_found', param: 'model' });

    const anonymous = await fetch(`${host.url}v1/models/openai/gpt-4o-mini`, { headers: { 'X-Project-ID': project.projectId } });
    expect(anonymous.status).toBe(401);
    const posted = await fetch(`${host.url}v1/models/openai/gpt-4o-mini`, { method: 'POST', headers: { Authorization: `Bearer ${openai.apiKey}`, 'X-Project-ID': project.projectId } });
    expect(posted.status).toBe(405);
    expect(posted.headers.get('allow')).toBe('GET');
  });
});
