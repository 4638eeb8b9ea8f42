/**
 * Resolves a request's `model` (`provider/model`, or none for the default) to the ChatModel that serves it, and
 * lists the configured models for GET /v1/models. SDK clients are made once per provider and key: the configured
 * key's at start-up, a project's own key (e.g. from Medplum's Project.secret) on first use, then kept in a bounded
 * cache keyed by a SHA-256 of the key, never the key itself.
 */
import { createHash } from 'node:crypto';
import { AppError } from '../errors.ts';
import type { ChatModel } from './chat-model.ts';
import { createChatModel } from './create-chat-model.ts';
import { needsApiKey } from './provider-config.ts';
import type { ProviderConfig, ProviderSettings } from './provider-config.ts';

/** The model a request asked for, ready to call. */
export interface ResolvedModel {
  readonly model: ChatModel;
  /** The model or deployment name to put in `ChatModelRequest.model`. */
  readonly modelName: string;
  /** `provider/model`: the id to report back to the client. */
  readonly id: string;
}

/** One entry of the model list. */
export interface ModelListEntry {
  /** `provider/model`. */
  readonly id: string;
  readonly provider: string;
}

/** Per-request choices. */
export interface ResolveOptions {
  /** A key to use instead of the configured one (a project's own key); it is never logged or kept in clear. */
  readonly apiKey?: string;
}

/** The configured models. */
export interface ModelRegistry {
  /** `provider/model` of the default model. */
  readonly defaultModelId: string;
  /**
   * The model for a request's `model` field: `provider/model`, or a bare model name offered by exactly one
   * provider; undefined or empty means the default. Throws AppError `invalid_request` (400) naming the model when
   * it is not configured.
   */
  resolve(model: string | undefined, options?: ResolveOptions): ResolvedModel;
  /** Every configured model, in configuration order. */
  list(): readonly ModelListEntry[];
}

/** Makes a provider's ChatModel; replaceable in tests. */
export type ChatModelFactory = (provider: string, settings: ProviderSettings, apiKey: string | undefined) => ChatModel;

interface ModelEntry {
  readonly id: string;
  readonly provider: string;
  readonly modelName: string;
}

// Bounds the clients kept for per-project keys; the least recently used one goes first.
const PROJECT_KEY_CACHE_LIMIT = 100;
// A model string is echoed in errors; a client sending a huge one gets a shortened echo.
const MAX_ECHOED_MODEL_LENGTH = 200;

/** Creates the registry and the SDK clients of the configured keys; throws when a provider cannot be set up. */
export function createModelRegistry(config: ProviderConfig, factory: ChatModelFactory = createChatModel): ModelRegistry {
  const entries: ModelEntry[] = [];
  const entryById = new Map<string, ModelEntry>();
  const entriesByModelName = new Map<string, ModelEntry[]>();
  for (const [provider, settings] of Object.entries(config.providers)) {
    for (const modelName of settings.models) {
      const entry = { id: `${provider}/${modelName}`, provider, modelName };
      if (entryById.has(entry.id)) {
        continue;
      }
      entries.push(entry);
      entryById.set(entry.id, entry);
      entriesByModelName.set(modelName, [...(entriesByModelName.get(modelName) ?? []), entry]);
    }
  }

  const configuredModels = new Map<string, ChatModel>();
  for (const [provider, settings] of Object.entries(config.providers)) {
    if (settings.apiKey !== undefined || !needsApiKey(settings.kind)) {
      configuredModels.set(provider, factory(provider, settings, settings.apiKey));
    }
  }
  const projectKeyModels = new Map<string, ChatModel>();

  const modelFor = (provider: string, apiKey: string | undefined): ChatModel => {
    const settings = config.providers[provider];
    if (apiKey === undefined || apiKey === settings.apiKey) {
      const configured = configuredModels.get(provider);
      if (configured === undefined) {
        throw new AppError('internal_error', `The LLM provider '${provider}' has no API key configured.`, {
          details: { provider },
        });
      }
      return configured;
    }
    const cacheKey = `${provider}\n${createHash('sha256').update(apiKey).digest('hex')}`;
    let model = projectKeyModels.get(cacheKey);
    if (model === undefined) {
      model = factory(provider, settings, apiKey);
      if (projectKeyModels.size >= PROJECT_KEY_CACHE_LIMIT) {
        const oldest = projectKeyModels.keys().next();
        if (!oldest.done) {
          projectKeyModels.delete(oldest.value);
        }
      }
    } else {
      projectKeyModels.delete(cacheKey);
    }
    projectKeyModels.set(cacheKey, model);
    return model;
  };

  const findEntry = (requested: string): ModelEntry => {
    const entry = entryById.get(requested);
    if (entry !== undefined) {
      return entry;
    }
    const byName = entriesByModelName.get(requested) ?? [];
    if (byName.length === 1) {
      return byName[0];
    }
    const echoed = requested.length > MAX_ECHOED_MODEL_LENGTH ? `${requested.slice(0, MAX_ECHOED_MODEL_LENGTH)}…` : requested;
    throw new AppError(
      'invalid_request',
      byName.length > 1
        ? `The model '${echoed}' is offered by several providers; name it as provider/model.`
        : `The model '${echoed}' is not available; GET /v1/models lists the models you can use.`,
      { details: { param: 'model' } },
    );
  };

  return {
    defaultModelId: config.defaultModel,
    resolve: (model, options = {}) => {
      const entry = findEntry(model === undefined || model.trim() === '' ? config.defaultModel : model.trim());
      return { model: modelFor(entry.provider, options.apiKey), modelName: entry.modelName, id: entry.id };
    },
    list: () => entries.map(({ id, provider }) => ({ id, provider })),
  };
}
