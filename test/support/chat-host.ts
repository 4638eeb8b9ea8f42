/**
 * A test host whose one provider, `openai` (model `gpt-4o-mini`), is the loopback LLM emulator: the set-up most
 * end-to-end chat tests share.
 */
import type { ProviderConfigInput } from '../../plugin/llm/provider-config.ts';
import type { FhirgateOptionsInput } from '../../plugin/options.ts';
import { startLlmEmulator, type LlmEmulator } from '../emulator/index.ts';
import { startTestHost, type TestHost, type TestHostOptions } from './test-host.ts';

export const CHAT_MODEL = 'openai/gpt-4o-mini';

export interface ChatHost {
  readonly emulator: LlmEmulator;
  readonly host: TestHost;
  close(): Promise<void>;
}

/** The other provider kinds, by their names in {@link startChatHost}'s `withProviders`. */
export const OTHER_PROVIDERS = {
  anthropic: { model: 'anthropic/claude-haiku-4-5', settings: (url: string) => ({ kind: 'anthropic' as const, apiKey: 'sk-ant-test', baseUrl: url, models: ['claude-haiku-4-5'] }) },
  ollama: { model: 'ollama/llama3.2', settings: (url: string) => ({ kind: 'ollama' as const, baseUrl: url, models: ['llama3.2'] }) },
  // Its operator passes vLLM's two sampling extensions on; any other field fhirgate does not know is refused.
  vllm: { model: 'vllm/qwen3-8b', settings: (url: string) => ({ kind: 'openai-compatible' as const, baseUrl: `${url}/v1`, models: ['qwen3-8b'], passThroughFields: ['min_p', 'repetition_penalty'] }) },
} as const;

/**
 * Starts the emulator and a host on it; `provider` adds to the `openai` provider's settings (e.g. `retries`),
 * `withProviders` configures other provider kinds beside it, answered by the same emulator, and `plugin` sets the
 * plugin's other options.
 */
export async function startChatHost(
  options: {
    readonly provider?: Partial<ProviderConfigInput['providers'][string]>;
    readonly withProviders?: readonly (keyof typeof OTHER_PROVIDERS)[];
    readonly host?: Omit<TestHostOptions, 'plugin' | 'pluginFor'>;
    /** Other plugin options (`llm` is the emulator's). */
    readonly plugin?: Omit<FhirgateOptionsInput, 'llm'>;
  } = {}
): Promise<ChatHost> {
  const emulator = await startLlmEmulator();
  const provider = { kind: 'openai' as const, apiKey: 'sk-test-provider-key', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], ...options.provider };
  const others = Object.fromEntries((options.withProviders ?? []).map((name) => [name, OTHER_PROVIDERS[name].settings(emulator.url)]));
  // The emulator answers on loopback: every model of these tests is cleared for patient data.
  const llm = { providers: { openai: provider, ...others }, defaultModel: CHAT_MODEL, patientDataModels: ['openai/*', ...(options.withProviders ?? []).map((name) => `${name}/*`)] };
  const host = await startTestHost({ ...options.host, plugin: { ...options.plugin, llm } });
  return {
    emulator,
    host,
    close: async () => {
      await host.close();
      await emulator.close();
    },
  };
}
