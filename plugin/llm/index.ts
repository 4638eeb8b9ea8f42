/**
 * The provider layer's public surface: the ChatModel port, the model registry that resolves `provider/model`
 * strings to ChatModels, the provider configuration, and the helpers a caller needs to tell an abort from a
 * provider failure.
 */
export type {
  ChatCompletion,
  ChatFinishReason,
  ChatMessage,
  ChatModel,
  ChatModelRequest,
  ChatStreamEvent,
  ChatTool,
  ChatToolCall,
  ChatToolChoice,
  ChatUsage,
} from './chat-model.ts';
export { createChatModel } from './create-chat-model.ts';
export { createModelRegistry } from './model-registry.ts';
export type { ChatModelFactory, ModelCatalog, ModelListEntry, ModelRegistry, ProjectModelChoice, ResolvedModel, ResolveOptions } from './model-registry.ts';
export {
  DEFAULT_AZURE_API_VERSION,
  PROVIDER_KINDS,
  parseProviderConfig,
  providerConfigSchema,
  readProviderConfigFromEnvironment,
} from './provider-config.ts';
export type { ProviderConfig, ProviderConfigInput, ProviderKind, ProviderSettings } from './provider-config.ts';
export { createAbortError, isAbortError } from './provider-errors.ts';
