/**
 * The whole chat-completions request through the gateway, with the official openai SDK against the standalone host
 * and the emulator as OpenAI, Anthropic and Ollama: each field reaches each provider as that provider takes it, or
 * is refused by name with nothing stored and no provider called; what was asked and answered is on record.
 */
import { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { createStructuredReplyText, startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { FhirgateCompletion } from './support/chat-clients.ts';

const PROVIDERS = ['openai/gpt-4o-mini', 'anthropic/claude-haiku-4-5', 'ollama/llama3.2'] as const;
const SCHEMA = {
  type: 'object',
  properties: { systolic: { type: 'integer', minimum: 90 }, trend: { type: 'string', enum: ['stable', 'rising'] } },
  required: ['systolic', 'trend'],
  additionalProperties: false,
};

describe('the fields of a chat-completions request, end to end', () => {
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
          providers: {
            openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'] },
            anthropic: { kind: 'anthropic', apiKey: 'sk-ant-test', baseUrl: emulator.url, models: ['claude-haiku-4-5'] },
            ollama: { kind: 'ollama', baseUrl: emulator.url, models: ['llama3.2'] },
            // A gateway such as LiteLLM behind fhirgate: its operator passes one sampling extension on, nothing else.
            litellm: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o'], passThroughFields: ['min_p'] },
          },
          defaultModel: 'openai/gpt-4o-mini',
        },
        chatLimits: { maxTokens: 1000 },
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

  const read = (id: string): Promise<Communication> => medplum.readResource('Communication', id, { cache: 'no-cache' });
  const countCommunications = async (): Promise<number> => (await medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' })).length;

  test.each(PROVIDERS)('%s: json_schema structured output is enforced by the provider, answered as JSON and stored', async (model) => {
    const completion = (await openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Blood pressure trend?' }],
      response_format: { type: 'json_schema', json_schema: { name: 'bp', schema: SCHEMA, strict: true } },
    })) as FhirgateCompletion;

    const expected = createStructuredReplyText({ messages: [], output: { responseFormat: { type: 'json_schema', schema: SCHEMA }, choices: 1 } });
    expect(JSON.parse(completion.choices[0].message.content ?? '')).toEqual({ systolic: 90, trend: 'stable' });
    expect(completion.choices[0].message.content).toBe(expected);
    expect(emulator.received[0].output.responseFormat).toMatchObject({ type: 'json_schema', schema: SCHEMA });
    expect((await read(completion.communication_id)).payload).toEqual([{ contentString: expected }]);
  });

  test('OpenAI: developer messages and text parts reach the model as sent; the prompt records each part and the body', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'developer', content: 'Answer in one line.' },
      { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'text', text: ' there' }] },
    ];
    const completion = (await openai.chat.completions.create({ model: 'openai/gpt-4o-mini', messages, user: 'clinician-7', store: false, metadata: { ward: '7' } })) as FhirgateCompletion;

    const { body } = emulator.received[0];
    expect(body.messages).toEqual(messages);
    // store: false is passed to OpenAI; fhirgate records the turn all the same (the audit trail is not optional).
    expect(body).toMatchObject({ user: 'clinician-7', store: false });
    expect(body).not.toHaveProperty('metadata');
    const reply = await read(completion.communication_id);
    expect(reply.status).toBe('completed');
    const prompt = await read(reply.inResponseTo?.[0]?.reference?.split('/')[1] ?? '');
    expect(prompt.payload).toEqual([{ contentString: 'hi' }, { contentString: ' there' }]);
    const recorded = JSON.parse(prompt.extension?.find((extension) => extension.url === EXTENSION.chatRequest)?.valueString ?? '{}');
    expect(recorded).toMatchObject({ messages, user: 'clinician-7', store: false, metadata: { ward: '7' } });
  });

  test('Anthropic and Ollama take developer messages as system instructions', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'developer', content: 'Answer in one line.' },
      { role: 'user', content: 'hi' },
    ];
    await openai.chat.completions.create({ model: 'anthropic/claude-haiku-4-5', messages });
    await openai.chat.completions.create({ model: 'ollama/llama3.2', messages });

    expect(emulator.received[0].body.system).toBe('Answer in one line.');
    expect(emulator.received[1].messages[0]).toEqual({ role: 'system', content: 'Answer in one line.' });
  });

  test('max_completion_tokens bounds the reply as the provider receives it; over the server cap it is refused', async () => {
    const completion = await openai.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'one two three four' }], max_completion_tokens: 2 });
    expect(completion.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: 'Echo: one' } });
    expect(emulator.received[0].body.max_completion_tokens).toBe(2);

    const failure = await openai.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], max_completion_tokens: 1001 }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ param: 'max_completion_tokens' });
  });

  test('OpenAI: logprobs come back in the answer and in every content chunk; reasoning_effort reaches the model', async () => {
    const request = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user' as const, content: 'two words' }], logprobs: true, top_logprobs: 2, reasoning_effort: 'low' as const };
    const completion = await openai.chat.completions.create(request);
    expect(completion.choices[0].logprobs?.content?.map((token) => token.token)).toEqual(['Echo:', ' two', ' words']);
    expect(completion.choices[0].logprobs?.content?.[0].top_logprobs).toHaveLength(2);
    expect(emulator.received[0].output).toMatchObject({ logprobs: { top: 2 }, reasoningEffort: 'low' });

    const stream = await openai.chat.completions.create({ ...request, stream: true });
    const tokens: string[] = [];
    for await (const chunk of stream) {
      tokens.push(...(chunk.choices[0]?.logprobs?.content ?? []).map((token) => token.token));
    }
    expect(tokens).toEqual(['Echo:', ' two', ' words']);
  });

  test('Anthropic takes reasoning_effort as its effort; Ollama as think', async () => {
    await openai.chat.completions.create({ model: 'anthropic/claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }], reasoning_effort: 'high' });
    await openai.chat.completions.create({ model: 'ollama/llama3.2', messages: [{ role: 'user', content: 'hi' }], reasoning_effort: 'low' });
    expect(emulator.received.map((received) => received.output.reasoningEffort)).toEqual(['high', 'low']);
  });

  test.each([
    ['logprobs on Anthropic', { model: 'anthropic/claude-haiku-4-5', logprobs: true }, 'logprobs'],
    ['logit_bias on Ollama', { model: 'ollama/llama3.2', logit_bias: { '42': 5 } }, 'logit_bias'],
    ['seed on Anthropic', { model: 'anthropic/claude-haiku-4-5', seed: 7 }, 'seed'],
    ['service_tier on Ollama', { model: 'ollama/llama3.2', service_tier: 'flex' }, 'service_tier'],
    ['n above 1', { model: 'openai/gpt-4o-mini', n: 2 }, 'n'],
    ...PROVIDERS.map((model): [string, Record<string, unknown>, string] => [`a schema beside json_object on ${model}`, { model, messages: [{ role: 'user', content: 'json?' }], response_format: { type: 'json_object', schema: SCHEMA } }, 'response_format.schema']),
    ['an image part', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.org/x.png' } }] }] }, 'messages.0.content.0.type'],
    ['a field fhirgate does not know', { temperature_scale: 2 }, 'temperature_scale'],
    ["LiteLLM's fallbacks on an OpenAI-compatible provider", { model: 'litellm/gpt-4o', fallbacks: [{ 'gpt-4o': ['gpt-4o-uncleared'] }] }, 'fallbacks'],
    ["LiteLLM's mock_testing_fallbacks", { model: 'litellm/gpt-4o', mock_testing_fallbacks: true }, 'mock_testing_fallbacks'],
    ["LiteLLM's user_config, with a model_list of its own", { model: 'litellm/gpt-4o', user_config: { model_list: [{ model_name: 'gpt-4o', litellm_params: { model: 'openai/gpt-4o', api_base: 'https://attacker.example/v1', api_key: 'sk-x' } }] } }, 'user_config'],
    ['api_base', { model: 'litellm/gpt-4o', api_base: 'https://attacker.example/v1' }, 'api_base'],
    ["vLLM's chat_template", { model: 'litellm/gpt-4o', chat_template: '{{ messages }}' }, 'chat_template'],
    ['a listed field beside one that is not', { model: 'litellm/gpt-4o', min_p: 0.1, api_base: 'https://attacker.example/v1' }, 'api_base'],
  ])('%s: 400 naming the field, nothing stored, no provider called', async (_name, fields, param) => {
    const before = await countCommunications();
    const body = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], ...fields } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
    const failure = await openai.chat.completions.create(body).catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request', param });
    expect(emulator.received).toHaveLength(0);
    expect(await countCommunications()).toBe(before);
  });

  test('an OpenAI-compatible provider receives the field its operator lists, as sent, and the prompt records it', async () => {
    const body = { model: 'litellm/gpt-4o', messages: [{ role: 'user', content: 'hi' }], min_p: 0.1 } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
    const completion = (await openai.chat.completions.create(body)) as FhirgateCompletion;

    expect(emulator.received[0].body).toMatchObject({ model: 'gpt-4o', min_p: 0.1 });
    const reply = await read(completion.communication_id);
    const prompt = await read(reply.inResponseTo?.[0]?.reference?.split('/')[1] ?? '');
    const recorded = JSON.parse(prompt.extension?.find((extension) => extension.url === EXTENSION.chatRequest)?.valueString ?? '{}');
    expect(recorded).toMatchObject({ min_p: 0.1 });
  });

  test("instructor's JSON_SCHEMA mode: an OpenAI-compatible provider receives the schema beside json_object as sent, and the answer follows it", async () => {
    // What instructor sends in Mode.JSON_SCHEMA: the schema in a system message, and beside json_object.
    const messages = [
      { role: 'system', content: `As a genius expert, your task is to understand the content and provide the parsed objects in json that match the following json_schema:\n\n${JSON.stringify(SCHEMA, null, 2)}\n\nMake sure to return an instance of the JSON, not the schema itself` },
      { role: 'user', content: 'Blood pressure 120/80, stable.' },
    ];
    const body = { model: 'litellm/gpt-4o', messages, response_format: { type: 'json_object', schema: SCHEMA } } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
    const completion = (await openai.chat.completions.create(body)) as FhirgateCompletion;

    // Not a top-level field: the provider's passThroughFields (min_p only) does not govern it.
    expect(emulator.received[0].body.response_format).toEqual({ type: 'json_object', schema: SCHEMA });
    expect(JSON.parse(completion.choices[0].message.content ?? '')).toEqual({ systolic: 90, trend: 'stable' });
    const reply = await read(completion.communication_id);
    const prompt = await read(reply.inResponseTo?.[0]?.reference?.split('/')[1] ?? '');
    const recorded = JSON.parse(prompt.extension?.find((extension) => extension.url === EXTENSION.chatRequest)?.valueString ?? '{}');
    expect(recorded.response_format).toEqual({ type: 'json_object', schema: SCHEMA });
  });
});
