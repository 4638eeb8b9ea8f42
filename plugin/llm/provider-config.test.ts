import { describe, expect, test } from '@jest/globals';
import { DEFAULT_AZURE_API_VERSION, parseProviderConfig, readProviderConfigFromEnvironment } from './provider-config.ts';

const SECRET = 'sk-live-9d8c7b6a5f4e3d2c';

function readError(read: () => unknown): string {
  try {
    read();
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  throw new Error('expected an error');
}

const DEFAULT_RETRIES = { maxRetries: 2, baseDelayMs: 250, maxDelayMs: 10_000 };

describe('readProviderConfigFromEnvironment', () => {
  test('returns undefined when AI_PROVIDER is unset or blank', () => {
    expect(readProviderConfigFromEnvironment({})).toBeUndefined();
    expect(readProviderConfigFromEnvironment({ AI_PROVIDER: '  ', AI_API_KEY: SECRET })).toBeUndefined();
  });

  test('reads one provider, named as AI_PROVIDER, with the spec defaults', () => {
    expect(readProviderConfigFromEnvironment({ AI_PROVIDER: 'openai', AI_MODEL: 'gpt-4o-mini', AI_API_KEY: SECRET })).toEqual({
      providers: {
        openai: { kind: 'openai', apiKey: SECRET, timeoutMs: 120_000, connectTimeoutMs: 10_000, retries: DEFAULT_RETRIES, models: ['gpt-4o-mini'] },
      },
      defaultModel: 'openai/gpt-4o-mini',
      maxTokens: 4096,
      fallbacks: {},
      patientDataModels: [],
      patientDataModelsSetting: "AI_PATIENT_DATA_MODELS in the server's environment",
    });
  });

  test('AI_PATIENT_DATA_MODELS clears models for patient data, with or without the provider prefix; other providers are refused', () => {
    const environment = { AI_PROVIDER: 'azure', AI_API_BASE: 'https://clinic.openai.azure.com', AI_API_KEY: SECRET, AI_MODEL: 'gpt-4o-prod', AI_MODELS: 'gpt-4o-test' };
    expect(readProviderConfigFromEnvironment({ ...environment, AI_PATIENT_DATA_MODELS: 'gpt-4o-prod, azure/gpt-4o-test' })?.patientDataModels).toEqual(['azure/gpt-4o-prod', 'azure/gpt-4o-test']);
    expect(readProviderConfigFromEnvironment({ ...environment, AI_PATIENT_DATA_MODELS: '*' })?.patientDataModels).toEqual(['azure/*']);
    // Refusals name the list as this host takes it: the variable, not the plugin option.
    expect(readProviderConfigFromEnvironment(environment)?.patientDataModelsSetting).toBe("AI_PATIENT_DATA_MODELS in the server's environment");
    expect(readError(() => readProviderConfigFromEnvironment({ ...environment, AI_PATIENT_DATA_MODELS: 'gpt-5' }))).toContain('AI_PATIENT_DATA_MODELS');
    const providers = { a: { kind: 'ollama' as const, models: ['m1'] } };
    expect(readError(() => parseProviderConfig({ providers, defaultModel: 'a/m1', patientDataModels: ['b/*'] }))).toContain('patientDataModels');
  });

  test('reads the first-token and total timeouts and the retries', () => {
    const config = readProviderConfigFromEnvironment({
      AI_PROVIDER: 'ollama',
      AI_MODEL: 'llama3.2',
      AI_FIRST_TOKEN_TIMEOUT_MS: '5000',
      AI_TOTAL_TIMEOUT_MS: '300000',
      AI_CONNECT_TIMEOUT_MS: '2000',
      AI_MAX_RETRIES: '0',
    });
    expect(config?.providers.ollama).toMatchObject({ firstTokenTimeoutMs: 5000, totalTimeoutMs: 300_000, connectTimeoutMs: 2000, retries: { maxRetries: 0 } });
    expect(readError(() => readProviderConfigFromEnvironment({ AI_PROVIDER: 'ollama', AI_MODEL: 'm', AI_MAX_RETRIES: '11' }))).toContain('AI_MAX_RETRIES');
    expect(readError(() => readProviderConfigFromEnvironment({ AI_PROVIDER: 'ollama', AI_MODEL: 'm', AI_MAX_RETRIES: 'lots' }))).toContain('AI_MAX_RETRIES');
  });

  test('AI_PASS_THROUGH_FIELDS lists the fields fhirgate does not know that the provider receives; default none', () => {
    const environment = { AI_PROVIDER: 'openai-compatible', AI_API_BASE: 'http://vllm:8000/v1', AI_MODEL: 'qwen3-8b' };
    expect(readProviderConfigFromEnvironment(environment)?.providers['openai-compatible'].passThroughFields).toBeUndefined();
    expect(readProviderConfigFromEnvironment({ ...environment, AI_PASS_THROUGH_FIELDS: 'min_p, repetition_penalty,,' })?.providers['openai-compatible'].passThroughFields).toEqual(['min_p', 'repetition_penalty']);
    expect(readError(() => readProviderConfigFromEnvironment({ ...environment, AI_PASS_THROUGH_FIELDS: 'min-p' }))).toContain('AI_PASS_THROUGH_FIELDS');
    expect(readError(() => readProviderConfigFromEnvironment({ AI_PROVIDER: 'ollama', AI_MODEL: 'm', AI_PASS_THROUGH_FIELDS: 'min_p' }))).toContain('AI_PASS_THROUGH_FIELDS');
  });

  test('passThroughFields: OpenAI-style kinds only, field names only', () => {
    const openai = { kind: 'openai' as const, apiKey: SECRET, models: ['m'], passThroughFields: ['min_p'] };
    expect(parseProviderConfig({ providers: { o: openai }, defaultModel: 'o/m' }).providers.o.passThroughFields).toEqual(['min_p']);
    expect(readError(() => parseProviderConfig({ providers: { a: { kind: 'anthropic', models: ['m'], passThroughFields: ['min_p'] } }, defaultModel: 'a/m' }))).toContain(
      'providers.a.passThroughFields: is for OpenAI-style kinds only',
    );
    expect(readError(() => parseProviderConfig({ providers: { o: { ...openai, passThroughFields: ['a.b'] } }, defaultModel: 'o/m' }))).toContain('providers.o.passThroughFields.0');
  });

  test('fallbacks must name configured models', () => {
    const providers = { a: { kind: 'ollama' as const, models: ['m1', 'm2'] } };
    expect(parseProviderConfig({ providers, defaultModel: 'a/m1', fallbacks: { 'a/m1': ['a/m2'] } }).fallbacks).toEqual({ 'a/m1': ['a/m2'] });
    expect(readError(() => parseProviderConfig({ providers, defaultModel: 'a/m1', fallbacks: { 'a/m1': ['b/m3'] } }))).toContain('fallbacks.a/m1');
  });

  test('takes AI_MODEL with or without the provider prefix, and adds AI_MODELS', () => {
    const config = readProviderConfigFromEnvironment({
      AI_PROVIDER: 'anthropic',
      AI_MODEL: 'anthropic/claude-sonnet-5-5',
      AI_MODELS: 'claude-haiku-4-5, anthropic/claude-opus-4-1,,claude-sonnet-5-5',
      AI_API_KEY: SECRET,
      AI_MAX_TOKENS: '1024',
      AI_TIMEOUT_MS: '30000',
    });

    expect(config?.defaultModel).toBe('anthropic/claude-sonnet-5-5');
    expect(config?.maxTokens).toBe(1024);
    expect(config?.providers.anthropic).toMatchObject({
      kind: 'anthropic',
      timeoutMs: 30_000,
      models: ['claude-sonnet-5-5', 'claude-haiku-4-5', 'claude-opus-4-1'],
    });
  });

  test('keeps a slash that is part of the model name', () => {
    const config = readProviderConfigFromEnvironment({
      AI_PROVIDER: 'openai-compatible',
      AI_API_BASE: 'http://litellm:4000/v1',
      AI_MODEL: 'anthropic/claude-sonnet-5-5',
    });

    expect(config?.defaultModel).toBe('openai-compatible/anthropic/claude-sonnet-5-5');
    expect(config?.providers['openai-compatible']).toMatchObject({ kind: 'openai-compatible', baseUrl: 'http://litellm:4000/v1' });
  });

  test('azure maps to azure-openai, needs the endpoint, and defaults the api version', () => {
    const config = readProviderConfigFromEnvironment({
      AI_PROVIDER: 'azure',
      AI_MODEL: 'gpt4o-deployment',
      AI_API_KEY: SECRET,
      AI_API_BASE: 'https://clinic.openai.azure.com',
    });

    expect(config?.providers.azure).toMatchObject({
      kind: 'azure-openai',
      baseUrl: 'https://clinic.openai.azure.com',
      apiVersion: DEFAULT_AZURE_API_VERSION,
    });
    expect(
      readProviderConfigFromEnvironment({
        AI_PROVIDER: 'azure',
        AI_MODEL: 'd',
        AI_API_KEY: SECRET,
        AI_API_BASE: 'https://clinic.openai.azure.com',
        AI_API_VERSION: '2025-01-01-preview',
      })?.providers.azure.apiVersion,
    ).toBe('2025-01-01-preview');
  });

  test('ollama needs neither key nor base URL', () => {
    expect(readProviderConfigFromEnvironment({ AI_PROVIDER: 'ollama', AI_MODEL: 'llama3.2' })?.providers.ollama).toEqual({
      kind: 'ollama',
      timeoutMs: 120_000,
      connectTimeoutMs: 10_000,
      retries: DEFAULT_RETRIES,
      models: ['llama3.2'],
    });
  });

  test('AI_MODELS alone gives the default model', () => {
    expect(readProviderConfigFromEnvironment({ AI_PROVIDER: 'ollama', AI_MODELS: 'qwen3,llama3.2' })?.defaultModel).toBe('ollama/qwen3');
  });

  test('names every wrong variable, never the key', () => {
    const message = readError(() =>
      readProviderConfigFromEnvironment({
        AI_PROVIDER: 'azure',
        AI_API_KEY: SECRET,
        AI_MAX_TOKENS: 'lots',
        AI_TIMEOUT_MS: '-5',
      }),
    );

    expect(message).toContain('AI_API_BASE is required when AI_PROVIDER is azure');
    expect(message).toContain('AI_MAX_TOKENS must be a positive integer');
    expect(message).toContain('AI_TIMEOUT_MS must be a positive integer');
    expect(message).toContain('AI_MODEL is required');
    expect(message).not.toContain(SECRET);
  });

  test('an unknown provider and a missing key are named', () => {
    expect(readError(() => readProviderConfigFromEnvironment({ AI_PROVIDER: 'gemini', AI_MODEL: 'm' }))).toContain(
      'AI_PROVIDER must be one of openai, azure, anthropic, ollama, openai-compatible',
    );
    expect(readError(() => readProviderConfigFromEnvironment({ AI_PROVIDER: 'anthropic', AI_MODEL: 'm' }))).toContain(
      'AI_API_KEY is required when AI_PROVIDER is anthropic',
    );
  });

  test('a base URL that is not a URL names AI_API_BASE without printing it', () => {
    const message = readError(() =>
      readProviderConfigFromEnvironment({
        AI_PROVIDER: 'openai-compatible',
        AI_MODEL: 'm',
        AI_API_BASE: `ftp://user:${SECRET}@host`,
        AI_API_KEY: SECRET,
      }),
    );

    expect(message).toMatch(/^Invalid LLM provider configuration: AI_API_BASE: /);
    expect(message).not.toContain(SECRET);
  });
});

describe('parseProviderConfig', () => {
  test('fills defaults and accepts several named providers', () => {
    const config = parseProviderConfig({
      providers: {
        openai: { kind: 'openai', apiKey: SECRET, models: ['gpt-4o'] },
        local: { kind: 'ollama', baseUrl: 'http://gpu-box:11434', timeoutMs: 300_000, models: ['llama3.2', 'qwen3'] },
      },
      defaultModel: 'local/qwen3',
    });

    expect(config.maxTokens).toBe(4096);
    expect(config.providers.openai.timeoutMs).toBe(120_000);
    expect(config.providers.local.timeoutMs).toBe(300_000);
  });

  test('rejects a default model that is not configured, a missing base URL and unknown fields', () => {
    const message = readError(() =>
      parseProviderConfig({
        providers: {
          vllm: { kind: 'openai-compatible', apiKey: SECRET, models: ['m'], region: 'eu' },
        },
        defaultModel: 'vllm/other',
      }),
    );

    expect(message).toContain('providers.vllm.baseUrl: is required for kind openai-compatible');
    expect(message).toContain('Unrecognized key: "region"');
    expect(message).toContain('defaultModel: must be provider/model, naming a configured model');
    expect(message).not.toContain(SECRET);
  });

  test('rejects an empty provider list, bad provider names and a key of the wrong type without printing it', () => {
    expect(readError(() => parseProviderConfig({ providers: {}, defaultModel: 'a/b' }))).toContain('providers: needs at least one provider');
    expect(
      readError(() => parseProviderConfig({ providers: { 'a/b': { kind: 'ollama', models: ['m'] } }, defaultModel: 'a/b/m' })),
    ).toContain('providers.a/b');
    const message = readError(() =>
      parseProviderConfig({ providers: { o: { kind: 'openai', apiKey: 12345678987, models: ['m'] } }, defaultModel: 'o/m' }),
    );
    expect(message).toContain('providers.o.apiKey');
    expect(message).not.toContain('12345678987');
  });
});
