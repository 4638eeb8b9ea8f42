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
import type { RetryPolicy } from './resilient-chat-model.ts';

/** The model a request asked for, ready to call. */
export interface ResolvedModel {
  readonly model: ChatModel;
  /** The model or deployment name to put in `ChatModelRequest.model`. */
  readonly modelName: string;
  /** `provider/model`: the id to report back to the client. */
  readonly id: string;
  /** How failed calls to this model are retried (its provider's settings). */
  readonly retries: RetryPolicy;
  /** Models to try next, in order, when this one keeps failing (`fallbacks` in the configuration). */
  readonly fallbacks: readonly ResolvedModel[];
  /** True when the call goes with the project's own key, not the server's (whose agreement covers the data sent). */
  readonly usesProjectKey?: boolean;
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

/** A set of models to choose from: the operator's, or one project's. */
export interface ModelCatalog {
  /** `provider/model` of the default model. */
  readonly defaultModelId: string;
  /**
   * The model for a request's `model` field: `provider/model`, or a bare model name offered by exactly one
   * provider; undefined or empty means the default. Throws AppError `invalid_request` (400) naming the model when
   * the catalog does not offer it, and `not_configured` (503) when its provider has no key for this caller.
   */
  resolve(model: string | undefined): ResolvedModel;
  /** Every offered model, in configuration order. */
  list(): readonly ModelListEntry[];
}

/** A project's own choice of models and keys, each part optional (see `chat/project-models.ts`). */
export interface ProjectModelChoice {
  /** `provider/model` ids offered to the project instead of the configured list; providers must be configured. */
  readonly models?: readonly string[];
  /** `provider/model` default of the project; offered even when `models` does not list it. */
  readonly defaultModel?: string;
  /** API keys by provider name, used instead of the configured ones. */
  readonly apiKeys?: Readonly<Record<string, string>>;
}

/** The configured models, and each project's view of them. */
export interface ModelRegistry extends ModelCatalog {
  resolve(model: string | undefined, options?: ResolveOptions): ResolvedModel;
  /** The configured providers' names. */
  readonly providers: readonly string[];
  /** The catalog of a project; its model ids must name configured providers (else an Error is thrown). */
  forProject(choice: ProjectModelChoice): ModelCatalog;
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
  const configuredEntries = Object.entries(config.providers).flatMap(([provider, settings]) =>
    settings.models.map((modelName) => ({ id: `${provider}/${modelName}`, provider, modelName })),
  );
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
        throw new AppError('not_configured', `The LLM provider '${provider}' has no API key for this project.`, {
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

  const operator = createCatalog(configuredEntries, config.defaultModel);
  const hasProvider = (name: string): boolean => Object.hasOwn(config.providers, name);
  const toEntry = (id: string): ModelEntry => {
    const slash = id.indexOf('/');
    const provider = id.slice(0, slash);
    if (slash < 1 || slash === id.length - 1 || !hasProvider(provider)) {
      throw new Error(`'${id}' does not name a configured provider as provider/model.`);
    }
    return { id, provider, modelName: id.slice(slash + 1) };
  };

  // A model ready to call, with its fallbacks; a fallback whose provider has no key for the caller is left out.
  const resolveEntry = (entry: ModelEntry, keyOf: (provider: string) => string | undefined): ResolvedModel => ({
    ...toResolved(entry, keyOf),
    fallbacks: (config.fallbacks[entry.id] ?? []).flatMap((id) => {
      try {
        return [toResolved(toEntry(id), keyOf)];
      } catch {
        return [];
      }
    }),
  });
  const toResolved = (entry: ModelEntry, keyOf: (provider: string) => string | undefined): ResolvedModel => {
    const apiKey = keyOf(entry.provider);
    return {
      model: modelFor(entry.provider, apiKey),
      modelName: entry.modelName,
      id: entry.id,
      retries: config.providers[entry.provider].retries,
      fallbacks: [],
      usesProjectKey: apiKey !== undefined && apiKey !== config.providers[entry.provider].apiKey,
    };
  };

  return {
    defaultModelId: operator.defaultModelId,
    resolve: (model, options = {}) => {
      const entry = operator.find(model);
      return resolveEntry(entry, (provider) => (provider === entry.provider ? options.apiKey : undefined));
    },
    list: operator.list,
    providers: Object.keys(config.providers),
    forProject: (choice) => {
      const offered = choice.models === undefined ? configuredEntries : choice.models.map(toEntry);
      const defaultModel = choice.defaultModel === undefined ? undefined : toEntry(choice.defaultModel);
      const entries = defaultModel === undefined || offered.some((entry) => entry.id === defaultModel.id) ? offered : [defaultModel, ...offered];
      const catalog = createCatalog(entries, defaultModel?.id ?? (choice.models === undefined ? config.defaultModel : entries[0]?.id));
      return {
        defaultModelId: catalog.defaultModelId,
        resolve: (model) => resolveEntry(catalog.find(model), (provider) => choice.apiKeys?.[provider]),
        list: catalog.list,
      };
    },
  };
}

interface Catalog {
  readonly defaultModelId: string;
  find(model: string | undefined): ModelEntry;
  list(): readonly ModelListEntry[];
}

// Looks models up by `provider/model` id, or by a model name only one provider offers.
function createCatalog(allEntries: readonly ModelEntry[], defaultModelId: string | undefined): Catalog {
  const entryById = new Map<string, ModelEntry>();
  const entriesByModelName = new Map<string, ModelEntry[]>();
  for (const entry of allEntries) {
    if (!entryById.has(entry.id)) {
      entryById.set(entry.id, entry);
      entriesByModelName.set(entry.modelName, [...(entriesByModelName.get(entry.modelName) ?? []), entry]);
    }
  }
  const listed = [...entryById.values()].map(({ id, provider }) => ({ id, provider }));
  const find = (requested: string): ModelEntry => {
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
    defaultModelId: defaultModelId ?? '',
    find: (model) => {
      const requested = model?.trim() ?? '';
      if (requested !== '') {
        return find(requested);
      }
      if (defaultModelId === undefined) {
        throw new AppError('not_configured', 'No model is configured for this project.');
      }
      return find(defaultModelId);
    },
    list: () => listed,
  };
}
