/**
 * Which LLM provider the standalone host answers with. AI_PROVIDER names a real one (llm/provider-config.ts); with
 * AI_PROVIDER unset, `npm start` on a laptop is the one-command demo and answers with the offline echo provider
 * (demo-provider.ts). Outside the demo an echo must never answer a clinician, so no provider means no start:
 * - NODE_ENV=production (the Docker image sets it), or
 * - a data folder that is not the demo's (FHIRGATE_SEED_DEMO=false: the demo project is not loaded).
 * `AI_PROVIDER=demo` chooses the echo on purpose, anywhere (a demo in the image, say).
 */
import { readProviderConfigFromEnvironment, type ProviderConfig } from '../../llm/provider-config.ts';
import { StartUpError } from './start-up-error.ts';

/** The value of AI_PROVIDER that chooses the offline echo provider. */
export const DEMO_PROVIDER_NAME = 'demo';

/** The provider the host starts with: a configured one, or the demo echo (and why it was chosen). */
export type LlmProviderChoice =
  | { readonly kind: 'configured'; readonly config: ProviderConfig }
  | { readonly kind: 'demo'; readonly chosenBy: 'AI_PROVIDER=demo' | 'AI_PROVIDER unset' };

/** Decides from the environment; throws a StartUpError naming AI_PROVIDER when no provider may answer. */
export function chooseLlmProvider(environment: Readonly<Record<string, string | undefined>>, options: { readonly seedDemo: boolean }): LlmProviderChoice {
  const named = environment.AI_PROVIDER?.trim();
  if (named === DEMO_PROVIDER_NAME) {
    return { kind: 'demo', chosenBy: 'AI_PROVIDER=demo' };
  }
  const config = readProviderConfigFromEnvironment(environment);
  if (config) {
    return { kind: 'configured', config };
  }
  const outsideTheDemo = environment.NODE_ENV === 'production' ? 'NODE_ENV is production' : !options.seedDemo ? 'FHIRGATE_SEED_DEMO is false' : undefined;
  if (outsideTheDemo) {
    throw new StartUpError(
      `no LLM provider configured (AI_PROVIDER is unset, and ${outsideTheDemo}: the offline demo provider, which echoes prompts, is not started outside the demo). ` +
        'Set AI_PROVIDER (openai, azure, anthropic, ollama or openai-compatible) with AI_MODEL and AI_API_KEY or AI_API_BASE (docs/configuration.md), ' +
        'or AI_PROVIDER=demo to answer with the echo on purpose.',
    );
  }
  return { kind: 'demo', chosenBy: 'AI_PROVIDER unset' };
}
