/**
 * The one place that picks an adapter by provider kind: everything after this works with `ChatModel` only.
 */
import { createAnthropicChatModel } from './anthropic-chat-model.ts';
import type { ChatModel } from './chat-model.ts';
import { createOllamaChatModel } from './ollama-chat-model.ts';
import { createOpenAiChatModel } from './openai-chat-model.ts';
import { DEFAULT_PASS_THROUGH_FIELDS, type ProviderSettings } from './provider-config.ts';

/** Creates the model (and its SDK client) of a configured provider, with the given key. */
export function createChatModel(provider: string, settings: ProviderSettings, apiKey: string | undefined): ChatModel {
  const { baseUrl, timeoutMs, firstTokenTimeoutMs, totalTimeoutMs, connectTimeoutMs } = settings;
  const limits = { timeoutMs, firstTokenTimeoutMs, totalTimeoutMs, connectTimeoutMs };
  switch (settings.kind) {
    case 'openai':
    case 'azure-openai':
    case 'openai-compatible':
      return createOpenAiChatModel({
        provider,
        kind: settings.kind,
        apiKey,
        baseUrl,
        apiVersion: settings.apiVersion,
        ...limits,
        maxTokensParameter: settings.maxTokensParameter,
        passThroughFields: settings.passThroughFields ?? DEFAULT_PASS_THROUGH_FIELDS,
      });
    case 'anthropic':
      if (apiKey === undefined) {
        throw new Error(`LLM provider '${provider}' (anthropic) needs apiKey.`);
      }
      return createAnthropicChatModel({ provider, apiKey, baseUrl, ...limits });
    case 'ollama':
      return createOllamaChatModel({ provider, apiKey, baseUrl, ...limits });
  }
}
