/**
 * The offline demo provider: with no LLM provider configured, `npm start` still serves whole conversations by
 * running the loopback LLM emulator in-process as an OpenAI-compatible provider named `demo` (it echoes the last
 * user message). It is never used when `AI_PROVIDER` is set.
 */
import type { LlmEmulator } from '../../../test/emulator/index.ts';
import { startLlmEmulator } from '../../../test/emulator/index.ts';
import type { ProviderConfigInput } from '../../llm/provider-config.ts';

/** The demo model's id. */
export const DEMO_MODEL_ID = 'demo/echo';

/** Starts the in-process emulator and returns the provider configuration that points at it. */
export async function startDemoProvider(): Promise<{ llm: ProviderConfigInput; emulator: LlmEmulator }> {
  const emulator = await startLlmEmulator({ models: ['echo'] });
  return {
    emulator,
    llm: {
      providers: { demo: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: ['echo'] } },
      defaultModel: DEMO_MODEL_ID,
      // The echo runs in this process: nothing a turn sends leaves the machine, so patient data may go to it.
      patientDataModels: ['demo/*'],
    },
  };
}
