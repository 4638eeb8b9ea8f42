/**
 * A project's own models and provider keys, kept where Medplum keeps a project's configuration, so a project
 * administrator sets them in the Medplum app (Project → Settings / Secrets) with no server restart:
 *
 *   Project.setting  AI_MODELS            `provider/model` ids offered to the project, comma separated
 *   Project.setting  AI_MODEL             the project's default model, `provider/model`
 *   Project.secret   AI_API_KEY_<NAME>    the key for the provider named <name> (upper case, `-` and `.` as `_`)
 *   Project.secret   AI_API_KEY           the key for the provider of the project's default model
 *
 * Providers themselves (kind, base URL, timeouts) stay the operator's: a project may only pick models of
 * configured providers. Without settings the operator's list, default and keys apply.
 */
import type { Project } from '@medplum/fhirtypes';
import { LRUCache } from 'lru-cache';
import { AppError } from '../errors.ts';
import type { ModelCatalog, ModelRegistry, ProjectModelChoice } from '../llm/model-registry.ts';
import { projectSettingText, projectVersionKey } from '../project-settings.ts';

/** Names of the Project.setting and Project.secret entries fhirgate reads. */
export const PROJECT_SETTING = { models: 'AI_MODELS', defaultModel: 'AI_MODEL', apiKey: 'AI_API_KEY' } as const;

/** The secret name that holds a project's key for one provider, e.g. `AI_API_KEY_AZURE_EAST` for `azure-east`. */
export function apiKeySecretName(provider: string): string {
  return `${PROJECT_SETTING.apiKey}_${provider.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/**
 * The models a caller of `project` may use. Throws AppError `not_configured` (503) naming the setting when a
 * project setting names a provider the server does not configure; never echoes a secret.
 */
export function modelCatalogFor(registry: ModelRegistry, project: Project): ModelCatalog {
  // A version of a project never changes, so its catalog is made once, not on every turn.
  const version = projectVersionKey(project);
  let known = catalogs.get(registry);
  const cached = version === undefined ? undefined : known?.get(version);
  if (cached) {
    return cached;
  }
  const choice = readProjectModelChoice(registry, project);
  const catalog = choice === undefined ? registry : registry.forProject(choice);
  if (version !== undefined) {
    if (!known) {
      known = new LRUCache({ max: CATALOGS_KEPT });
      catalogs.set(registry, known);
    }
    known.set(version, catalog);
  }
  return catalog;
}

/** Projects whose catalog is kept, per registry; the least recently used goes first. */
const CATALOGS_KEPT = 1_000;
const catalogs = new WeakMap<ModelRegistry, LRUCache<string, ModelCatalog>>();

function readProjectModelChoice(registry: ModelRegistry, project: Project): ProjectModelChoice | undefined {
  const modelsSetting = projectSettingText(project.setting, PROJECT_SETTING.models);
  const defaultSetting = projectSettingText(project.setting, PROJECT_SETTING.defaultModel);
  const secrets = project.secret?.filter((secret) => secret.name.startsWith(PROJECT_SETTING.apiKey)) ?? [];
  if (modelsSetting === undefined && defaultSetting === undefined && secrets.length === 0) {
    return undefined;
  }

  const models = modelsSetting
    ?.split(',')
    .map((model) => model.trim())
    .filter((model) => model !== '')
    .map((model) => checkModelId(registry, PROJECT_SETTING.models, model));
  const defaultModel = defaultSetting === undefined ? undefined : checkModelId(registry, PROJECT_SETTING.defaultModel, defaultSetting);

  const apiKeys: Record<string, string> = {};
  const defaultProvider = (defaultModel ?? models?.[0] ?? registry.defaultModelId).split('/')[0];
  const sharedKey = projectSettingText(secrets, PROJECT_SETTING.apiKey);
  if (sharedKey !== undefined) {
    apiKeys[defaultProvider] = sharedKey;
  }
  for (const provider of registry.providers) {
    const key = projectSettingText(secrets, apiKeySecretName(provider));
    if (key !== undefined) {
      apiKeys[provider] = key;
    }
  }
  return { models, defaultModel, apiKeys };
}

function checkModelId(registry: ModelRegistry, setting: string, id: string): string {
  const slash = id.indexOf('/');
  if (slash < 1 || slash === id.length - 1 || !registry.providers.includes(id.slice(0, slash))) {
    throw new AppError(
      'not_configured',
      `The project setting ${setting} names '${id.slice(0, 200)}', which is not provider/model of a provider this server configures (${registry.providers.join(', ')}).`,
      { details: { setting } },
    );
  }
  return id;
}
