import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { startLlmEmulator } from '../../test/emulator/index.ts';
import type { LlmEmulator } from '../../test/emulator/index.ts';
import { appErrorOf } from '../../test/support/app-error.ts';
import type { ChatModel } from './chat-model.ts';
import { createModelRegistry } from './model-registry.ts';
import type { ChatModelFactory } from './model-registry.ts';
import { parseProviderConfig, readProviderConfigFromEnvironment } from './provider-config.ts';
import type { ProviderConfig, ProviderSettings } from './provider-config.ts';

const CONFIGURED_KEY = 'sk-configured-1111';

const config: ProviderConfig = parseProviderConfig({
  providers: {
    openai: { kind: 'openai', apiKey: CONFIGURED_KEY, models: ['gpt-4o', 'shared'] },
    local: { kind: 'ollama', models: ['llama3.2', 'shared', 'library/qwen3'] },
    claude: { kind: 'anthropic', models: ['claude-sonnet-5-5'] },
  },
  defaultModel: 'local/llama3.2',
});

function createFakeFactory() {
  const factory = jest.fn<ChatModelFactory>(
    (provider: string, _settings: ProviderSettings, apiKey: string | undefined): ChatModel => ({
      provider,
      complete: async () => ({ text: apiKey ?? '', finishReason: 'stop', usage: undefined }),
      stream: async function* () {
        yield { type: 'finish', finishReason: 'stop', usage: undefined };
      },
    }),
  );
  return factory;
}


describe('createModelRegistry', () => {
  test('resolves no model, or an empty one, to the default', () => {
    const registry = createModelRegistry(config, createFakeFactory());

    expect(registry.defaultModelId).toBe('local/llama3.2');
    for (const requested of [undefined, '', '  ']) {
      const resolved = registry.resolve(requested);
      expect(resolved).toMatchObject({ id: 'local/llama3.2', modelName: 'llama3.2' });
      expect(resolved.model.provider).toBe('local');
    }
  });

  test('resolves provider/model, keeping slashes of the model name', () => {
    const registry = createModelRegistry(config, createFakeFactory());

    expect(registry.resolve('openai/gpt-4o')).toMatchObject({ id: 'openai/gpt-4o', modelName: 'gpt-4o' });
    expect(registry.resolve('local/library/qwen3')).toMatchObject({ id: 'local/library/qwen3', modelName: 'library/qwen3' });
  });

  test('resolves a bare model name that one provider offers', () => {
    const registry = createModelRegistry(config, createFakeFactory());

    expect(registry.resolve('gpt-4o')).toMatchObject({ id: 'openai/gpt-4o' });
    expect(registry.resolve('library/qwen3')).toMatchObject({ id: 'local/library/qwen3' });
  });

  test('an unknown provider, an unlisted model or an ambiguous name is invalid_request naming the model', () => {
    const registry = createModelRegistry(config, createFakeFactory());

    for (const requested of ['openai/gpt-5-secret-preview', 'mistral/large', 'gpt-3']) {
      const error = appErrorOf(() => registry.resolve(requested));
      expect(error).toMatchObject({ code: 'invalid_request', status: 400, details: { param: 'model' } });
      expect(error.message).toContain(`'${requested}'`);
    }
    expect(appErrorOf(() => registry.resolve('shared')).message).toContain('several providers');
    expect(appErrorOf(() => registry.resolve('x'.repeat(10_000))).message.length).toBeLessThan(400);
  });

  test('lists every configured model with its provider, in order', () => {
    expect(createModelRegistry(config, createFakeFactory()).list()).toEqual([
      { id: 'openai/gpt-4o', provider: 'openai' },
      { id: 'openai/shared', provider: 'openai' },
      { id: 'local/llama3.2', provider: 'local' },
      { id: 'local/shared', provider: 'local' },
      { id: 'local/library/qwen3', provider: 'local' },
      { id: 'claude/claude-sonnet-5-5', provider: 'claude' },
    ]);
  });

  test('creates one client per configured provider, up front, and reuses it', () => {
    const factory = createFakeFactory();
    const registry = createModelRegistry(config, factory);

    // The Anthropic provider has no key: its client waits for a project key.
    expect(factory.mock.calls.map(([provider, , apiKey]) => [provider, apiKey])).toEqual([
      ['openai', CONFIGURED_KEY],
      ['local', undefined],
    ]);
    expect(registry.resolve('openai/gpt-4o').model).toBe(registry.resolve('openai/shared').model);
    expect(factory).toHaveBeenCalledTimes(2);
  });

  test('a project key gets its own client, made once; the configured key keeps the configured client', async () => {
    const factory = createFakeFactory();
    const registry = createModelRegistry(config, factory);
    const configured = registry.resolve('openai/gpt-4o').model;

    const first = registry.resolve('openai/gpt-4o', { apiKey: 'sk-project-a' }).model;
    const again = registry.resolve('openai/shared', { apiKey: 'sk-project-a' }).model;
    const other = registry.resolve('openai/gpt-4o', { apiKey: 'sk-project-b' }).model;

    expect(first).toBe(again);
    expect(first).not.toBe(configured);
    expect(other).not.toBe(first);
    expect(registry.resolve('openai/gpt-4o', { apiKey: CONFIGURED_KEY }).model).toBe(configured);
    expect(factory).toHaveBeenCalledTimes(4);
    const request = { model: 'gpt-4o', messages: [], maxTokens: 1, signal: new AbortController().signal };
    expect((await first.complete(request)).text).toBe('sk-project-a');
  });

  test('a provider without a configured key needs a project key', () => {
    const registry = createModelRegistry(config, createFakeFactory());
    const error = appErrorOf(() => registry.resolve('claude/claude-sonnet-5-5'));

    expect(error).toMatchObject({ code: 'not_configured', status: 503, details: { provider: 'claude' } });
    expect(registry.resolve('claude/claude-sonnet-5-5', { apiKey: 'sk-ant-project' }).model.provider).toBe('claude');
  });

  test('keeps a bounded number of project-key clients, dropping the least recently used', () => {
    const factory = createFakeFactory();
    const registry = createModelRegistry(config, factory);
    registry.resolve('gpt-4o', { apiKey: 'sk-key-0' });
    for (let index = 1; index <= 100; index++) {
      registry.resolve('gpt-4o', { apiKey: `sk-key-${index}` });
    }
    const callsBefore = factory.mock.calls.length;

    registry.resolve('gpt-4o', { apiKey: 'sk-key-100' });
    expect(factory.mock.calls.length).toBe(callsBefore);
    registry.resolve('gpt-4o', { apiKey: 'sk-key-0' });
    expect(factory.mock.calls.length).toBe(callsBefore + 1);
  });
});

describe('ModelRegistry.forProject', () => {
  test('a project list replaces the configured one; its models may be any model of a configured provider', () => {
    const registry = createModelRegistry(config, createFakeFactory());
    const project = registry.forProject({ models: ['openai/gpt-4.1', 'claude/claude-sonnet-5-5'] });

    expect(project.list()).toEqual([
      { id: 'openai/gpt-4.1', provider: 'openai' },
      { id: 'claude/claude-sonnet-5-5', provider: 'claude' },
    ]);
    expect(project.defaultModelId).toBe('openai/gpt-4.1');
    expect(project.resolve(undefined)).toMatchObject({ id: 'openai/gpt-4.1', modelName: 'gpt-4.1' });
    expect(appErrorOf(() => project.resolve('local/llama3.2'))).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(registry.resolve('local/llama3.2').id).toBe('local/llama3.2');
  });

  test('a project default is offered even when its list leaves it out', () => {
    const registry = createModelRegistry(config, createFakeFactory());

    const withList = registry.forProject({ models: ['openai/gpt-4o'], defaultModel: 'local/qwen3:8b' });
    expect(withList.defaultModelId).toBe('local/qwen3:8b');
    expect(withList.list().map((entry) => entry.id)).toEqual(['local/qwen3:8b', 'openai/gpt-4o']);

    const withoutList = registry.forProject({ defaultModel: 'openai/shared' });
    expect(withoutList.resolve('').id).toBe('openai/shared');
    expect(withoutList.list()).toEqual(registry.list());
  });

  test("a project's key reaches the provider; other providers keep the configured key", async () => {
    const registry = createModelRegistry(config, createFakeFactory());
    const project = registry.forProject({ apiKeys: { openai: 'sk-project-key', claude: 'sk-ant-project' } });
    const request = { model: 'm', messages: [], maxTokens: 1, signal: new AbortController().signal };

    expect((await project.resolve('openai/gpt-4o').model.complete(request)).text).toBe('sk-project-key');
    expect((await project.resolve('claude/claude-sonnet-5-5').model.complete(request)).text).toBe('sk-ant-project');
    expect(project.resolve('local/llama3.2').model).toBe(registry.resolve('local/llama3.2').model);
    expect((await registry.resolve('openai/gpt-4o').model.complete(request)).text).toBe(CONFIGURED_KEY);
  });

  test('an empty project list offers nothing and says the project has no model', () => {
    const project = createModelRegistry(config, createFakeFactory()).forProject({ models: [] });

    expect(project.list()).toEqual([]);
    expect(appErrorOf(() => project.resolve(undefined))).toMatchObject({ code: 'not_configured', status: 503 });
  });

  test('a model id whose provider is not configured is refused', () => {
    const registry = createModelRegistry(config, createFakeFactory());

    expect(registry.providers).toEqual(['openai', 'local', 'claude']);
    expect(() => registry.forProject({ models: ['mistral/large'] })).toThrow("'mistral/large'");
  });
});

describe('createModelRegistry with the real adapters', () => {
  let emulator: LlmEmulator;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
  });

  afterAll(async () => {
    await emulator.close();
  });

  test('a configuration read from the environment answers through the emulator', async () => {
    const environmentConfig = readProviderConfigFromEnvironment({
      AI_PROVIDER: 'openai-compatible',
      AI_API_BASE: `${emulator.url}/v1`,
      AI_MODEL: 'openai-compatible/llm-emulator',
    });
    if (environmentConfig === undefined) {
      throw new Error('expected a configuration');
    }
    const { model, modelName, id } = createModelRegistry(environmentConfig).resolve(undefined);
    const completion = await model.complete({
      model: modelName,
      messages: [{ role: 'user', content: 'ping' }],
      maxTokens: environmentConfig.maxTokens,
      signal: new AbortController().signal,
    });

    expect(id).toBe('openai-compatible/llm-emulator');
    expect(completion.text).toBe('Echo: ping');
    expect(emulator.received[0]).toMatchObject({ model: 'llm-emulator', body: { max_tokens: 4096 } });
  });
});
