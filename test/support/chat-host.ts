/**
 * A test host whose one provider, `openai` (model `gpt-4o-mini`), is the loopback LLM emulator: the set-up most
 * end-to-end chat tests share.
 */
import type { ProviderConfigInput } from '../../plugin/llm/provider-config.ts';
import { startLlmEmulator, type LlmEmulator } from '../emulator/index.ts';
import { startTestHost, type TestHost, type TestHostOptions } from './test-host.ts';

export const CHAT_MODEL = 'openai/gpt-4o-mini';

export interface ChatHost {
  readonly emulator: LlmEmulator;
  readonly host: TestHost;
  close(): Promise<void>;
}

/** Starts the emulator and a host on it; `provider` adds to the provider's settings (e.g. `retries`). */
export async function startChatHost(
  options: { readonly provider?: Partial<ProviderConfigInput['providers'][string]>; readonly host?: Omit<TestHostOptions, 'plugin' | 'pluginFor'> } = {}
): Promise<ChatHost> {
  const emulator = await startLlmEmulator();
  const provider = { kind: 'openai' as const, apiKey: 'sk-test-provider-key', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], ...options.provider };
  const host = await startTestHost({ ...options.host, plugin: { llm: { providers: { openai: provider }, defaultModel: CHAT_MODEL } } });
  return {
    emulator,
    host,
    close: async () => {
      await host.close();
      await emulator.close();
    },
  };
}
