/**
 * Which models may see patient data. An organisation may send patient data only to a provider it has an agreement
 * with (a BAA in the US, a DPA in Europe), and the agreement belongs to the account the data is sent with:
 *
 *   llm.patientDataModels (the operator)   the models the server's own provider accounts may receive patient data
 *                                          on (`provider/model` or `provider/*`); AI_PATIENT_DATA_MODELS in the
 *                                          server's environment, read by readProviderConfigFromEnvironment (which
 *                                          the standalone host uses, and a Medplum server as docs/mounting.md
 *                                          mounts it). Default: none. Messages name it as it was set.
 *   Project.setting AI_PATIENT_DATA_MODELS the project's list, same form, or `none`. It narrows the operator's list,
 *                                          and it clears models of providers the project calls with its own key
 *                                          (Project.secret AI_API_KEY_<NAME>): that agreement is the project's.
 *   Project.setting AI_PATIENT_DATA_POLICY what happens to a turn about a patient on a model that is not cleared:
 *                                          `refuse` (default, 403) or `de-identify`.
 *   Project.setting AI_PATIENT_DATA_TOOL_ARGUMENTS
 *                                          in a de-identified turn, what the client gets as the arguments of a call
 *                                          to one of its own tools: `pseudonymize` (default: as the model wrote
 *                                          them) or `re-identify` (the patient's identifiers put back).
 *
 * A project cannot clear a model it reaches through the server's account: the operator holds that agreement.
 */
import type { Project } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import type { ProviderConfig } from '../llm/provider-config.ts';
import { misconfiguredSetting, projectSettingText } from '../project-settings.ts';

/** How the operator's list is named where nothing else names it (`llm.patientDataModelsSetting`). */
export const OPERATOR_SETTING_BY_DEFAULT = 'the plugin option llm.patientDataModels';

/** How messages name the operator's list: as the provider configuration was read, or the plugin option. */
export function operatorSettingOf(config: Pick<ProviderConfig, 'patientDataModelsSetting'>): string {
  return config.patientDataModelsSetting ?? OPERATOR_SETTING_BY_DEFAULT;
}

/** The Project.setting names read here. */
export const PATIENT_DATA_SETTING = { models: 'AI_PATIENT_DATA_MODELS', policy: 'AI_PATIENT_DATA_POLICY', toolArguments: 'AI_PATIENT_DATA_TOOL_ARGUMENTS' } as const;

/** What a project does with a turn about a patient on a model that is not cleared. */
export const PATIENT_DATA_POLICIES = ['refuse', 'de-identify'] as const;
export type PatientDataPolicy = (typeof PATIENT_DATA_POLICIES)[number];

/** In a de-identified turn, what the client gets as the arguments of a call to its own tools. */
export const TOOL_ARGUMENTS_POLICIES = ['pseudonymize', 're-identify'] as const;
export type ToolArgumentsPolicy = (typeof TOOL_ARGUMENTS_POLICIES)[number];

/** How a turn about a patient is sent to a model: as it is, not at all, or de-identified. */
export type PatientDataTreatment = 'cleared' | 'refused' | 'de-identified';

/** A project's patient data settings, read from its Project resource at each request. */
export interface ProjectPatientData {
  /** The project's list; undefined: the operator's list applies as it is. */
  readonly models?: readonly string[];
  readonly policy: PatientDataPolicy;
  /** Default `pseudonymize`. */
  readonly toolArguments: ToolArgumentsPolicy;
}

/** A model as the clearance rules see it. */
export interface ClearanceTarget {
  /** `provider/model`. */
  readonly id: string;
  /** True when the project's own key pays for the call (its agreement, not the operator's). */
  readonly usesProjectKey?: boolean;
}

const PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*\/(\*|\S+)$/;

/** Whether `pattern` (`provider/model` or `provider/*`) names the model `modelId`. */
export function modelPatternMatches(pattern: string, modelId: string): boolean {
  return pattern.endsWith('/*') ? modelId.startsWith(pattern.slice(0, -1)) : pattern === modelId;
}

/** Problems of an operator list against the configured providers and models, for the options' validation. */
export function patientDataModelProblems(patterns: readonly string[], providers: Readonly<Record<string, { readonly models: readonly string[] }>>): string[] {
  return patterns.flatMap((pattern) => {
    const slash = pattern.indexOf('/');
    const provider = providers[pattern.slice(0, slash)];
    const model = pattern.slice(slash + 1);
    return slash > 0 && provider !== undefined && (model === '*' || provider.models.includes(model))
      ? []
      : [`'${pattern.slice(0, 100)}' must be provider/model or provider/*, naming a configured provider and model`];
  });
}

/** The configured models the operator did not clear for patient data, for the start-up warning. */
export function unclearedModels(config: Pick<ProviderConfig, 'providers' | 'patientDataModels'>): string[] {
  const ids = Object.entries(config.providers).flatMap(([provider, settings]) => settings.models.map((model) => `${provider}/${model}`));
  return ids.filter((id) => !config.patientDataModels.some((pattern) => modelPatternMatches(pattern, id)));
}

/** The project's settings; a malformed one is a 503 naming it (the administrator's to fix), never a silent default. */
export function readProjectPatientData(project: Project): ProjectPatientData {
  const modelsSetting = projectSettingText(project.setting, PATIENT_DATA_SETTING.models);
  const policySetting = projectSettingText(project.setting, PATIENT_DATA_SETTING.policy);
  if (policySetting !== undefined && !(PATIENT_DATA_POLICIES as readonly string[]).includes(policySetting)) {
    throw misconfiguredSetting(PATIENT_DATA_SETTING.policy, `must be one of ${PATIENT_DATA_POLICIES.join(', ')}`);
  }
  const policy = (policySetting ?? 'refuse') as PatientDataPolicy;
  const toolArgumentsSetting = projectSettingText(project.setting, PATIENT_DATA_SETTING.toolArguments);
  if (toolArgumentsSetting !== undefined && !(TOOL_ARGUMENTS_POLICIES as readonly string[]).includes(toolArgumentsSetting)) {
    throw misconfiguredSetting(PATIENT_DATA_SETTING.toolArguments, `must be one of ${TOOL_ARGUMENTS_POLICIES.join(', ')}`);
  }
  const toolArguments = (toolArgumentsSetting ?? 'pseudonymize') as ToolArgumentsPolicy;
  if (modelsSetting === undefined) {
    return { policy, toolArguments };
  }
  if (modelsSetting.toLowerCase() === 'none') {
    return { models: [], policy, toolArguments };
  }
  const models = modelsSetting
    .split(',')
    .map((model) => model.trim())
    .filter((model) => model !== '');
  const malformed = models.find((model) => !PATTERN.test(model));
  if (malformed !== undefined) {
    throw misconfiguredSetting(PATIENT_DATA_SETTING.models, `names '${malformed.slice(0, 100)}'; each entry must be provider/model or provider/*, or the whole setting none`);
  }
  return { models, policy, toolArguments };
}

/** Whether `model` is cleared for patient data in a project (see the file's comment for the rules). */
export function isCleared(operatorModels: readonly string[], project: ProjectPatientData, model: ClearanceTarget): boolean {
  const listed = (patterns: readonly string[]): boolean => patterns.some((pattern) => modelPatternMatches(pattern, model.id));
  if (project.models === undefined) {
    return !model.usesProjectKey && listed(operatorModels);
  }
  return listed(project.models) && (model.usesProjectKey === true || listed(operatorModels));
}

/** How a turn about a patient is sent to `model` in a project. */
export function treatmentOf(operatorModels: readonly string[], project: ProjectPatientData, model: ClearanceTarget): PatientDataTreatment {
  if (isCleared(operatorModels, project, model)) {
    return 'cleared';
  }
  return project.policy === 'de-identify' ? 'de-identified' : 'refused';
}

/**
 * The refusal of a turn about a patient on a model that is not cleared: why, and what would allow it, naming the
 * operator's list as the running host takes it (`operatorSetting`).
 */
export function patientDataRefusal(
  operatorModels: readonly string[],
  project: ProjectPatientData,
  model: ClearanceTarget,
  operatorSetting: string = OPERATOR_SETTING_BY_DEFAULT
): AppError {
  return new AppError(
    'patient_data_not_allowed',
    `The model '${model.id}' is not cleared for patient data in this project, so a turn about a patient is not sent to it: ` +
      `${notClearedBecause(operatorModels, project, model, operatorSetting)} A project administrator may instead set ${PATIENT_DATA_SETTING.policy} to de-identify.`,
    { details: { param: 'model' } }
  );
}

function notClearedBecause(operatorModels: readonly string[], project: ProjectPatientData, model: ClearanceTarget, operatorSetting: string): string {
  const listedBy = (patterns: readonly string[]): boolean => patterns.some((pattern) => modelPatternMatches(pattern, model.id));
  if (model.usesProjectKey) {
    return `the project calls it with its own key, and the project setting ${PATIENT_DATA_SETTING.models} does not list it.`;
  }
  if (project.models !== undefined && !listedBy(project.models)) {
    return `the project setting ${PATIENT_DATA_SETTING.models} does not list it.`;
  }
  return `it is called with the server's own account, which the server's operator has not cleared for it (${operatorSetting}); a project clears only providers it calls with its own key.`;
}

