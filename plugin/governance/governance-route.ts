/**
 * `GET /v1/governance`: the governance settings of the caller's project, for every member of it. Reading
 * `Project.setting` itself takes a project administrator (Medplum's `/admin/projects/<id>`), yet the rules bind every
 * member, and the people accountable for the AI (a reviewer, a compliance officer) must be able to see them. So
 * fhirgate shows exactly its governance settings, and nothing else of the Project: never `Project.secret`, never a
 * setting of anyone else. What it shows:
 *
 *   settings      the governance entries as stored (AI_PATIENT_DATA_*, AI_MODEL_ACCESS, AI_BUDGET_*, AI_MODEL_PRICES,
 *                 AI_SHARED_CONVERSATIONS), each with its value as text
 *   patient_data  the policy, the tool-arguments rule, the project's list of cleared models, and what a turn about a
 *                 patient does on each model of the project
 *   model_access  `all` or `access-policy`
 *   budgets       each budget's limit, what is spent in its current period (the project's, or the caller's own for
 *                 a user budget: the same view the budget check compares), what remains, and when it resets
 *   problems      settings that do not parse (the chat routes answer 503 `not_configured` naming them)
 *   can_change    whether the caller is a project administrator, who changes them with Medplum's settings route
 */
import type { Project, ProjectSetting } from '@medplum/fhirtypes';
import type { Request, Response } from 'express';
import { authenticateCaller } from '../chat/authenticate-caller.ts';
import type { ChatServices } from '../chat/chat-completion.ts';
import { modelCatalogFor } from '../chat/project-models.ts';
import { AppError } from '../errors.ts';
import { spentOf } from './budget-counters.ts';
import { periodsAt, windowOf } from './budget-periods.ts';
import { NANO_PER_DOLLAR } from './model-prices.ts';
import { patientDataFieldsFor } from './patient-data-egress.ts';
import { PATIENT_DATA_SETTING, readProjectPatientData } from './patient-data-settings.ts';
import { GOVERNANCE_SETTING, parseProjectGovernance, type Budget } from './project-governance-settings.ts';

/** The Project.setting names this route shows: fhirgate's governance rules (docs/governance.md). */
export const SHOWN_SETTINGS: readonly string[] = [
  PATIENT_DATA_SETTING.models,
  PATIENT_DATA_SETTING.policy,
  PATIENT_DATA_SETTING.toolArguments,
  GOVERNANCE_SETTING.modelAccess,
  GOVERNANCE_SETTING.prices,
  'AI_SHARED_CONVERSATIONS',
];

/** Whether a Project.setting entry is one of fhirgate's governance settings. */
export function isGovernanceSetting(name: string): boolean {
  return SHOWN_SETTINGS.includes(name) || name.startsWith(GOVERNANCE_SETTING.budgetPrefix);
}

/** A setting's value as text, whichever `value[x]` holds it. */
export function settingValueText(entry: ProjectSetting | undefined): string | undefined {
  if (entry === undefined) {
    return undefined;
  }
  const value = entry.valueString ?? entry.valueInteger ?? entry.valueDecimal ?? entry.valueBoolean;
  return value === undefined ? undefined : String(value);
}

/** Answers the governance settings of the caller's project. */
export async function handleGovernance(services: Pick<ChatServices, 'host' | 'governance' | 'models' | 'patientData'>, request: Request, response: Response): Promise<void> {
  const caller = await authenticateCaller(services.host, request);
  if (Object.keys(request.query).length > 0) {
    throw new AppError('invalid_request', 'GET /v1/governance takes no parameters.', { details: { param: Object.keys(request.query)[0].slice(0, 60) } });
  }
  // Read afresh rather than the caller's (a host may keep that a few seconds): the settings as they are now.
  const project = await (await services.host.getSystemRepo(caller.project.id)).readResource<Project>('Project', caller.project.id);
  const problems: { setting: string; message: string }[] = [];
  const governance = readOrNote(problems, () => parseProjectGovernance(project.setting ?? [], new Map()));
  const patientData = readOrNote(problems, () => readProjectPatientData(project));
  const now = Date.now();
  const periods = periodsAt(now);
  const user = caller.profile.reference ?? caller.membership.id;
  const spend = governance && governance.budgets.length > 0 ? await services.governance.counters.spend(project.id, user, periods) : undefined;
  response.json({
    object: 'governance',
    project_id: project.id,
    can_change: caller.membership.admin === true,
    settings: governanceSettings(project),
    model_access: governance?.modelAccess ?? null,
    patient_data: patientData
      ? { policy: patientData.policy, tool_arguments: patientData.toolArguments, project_models: patientData.models ?? null, models: modelTreatments(services, project) }
      : null,
    budgets: (governance?.budgets ?? []).map((budget) => {
      const spent = spend ? spentOf(spend[budget.period], budget.scope, budget.measure) : 0;
      return {
        setting: budget.setting,
        scope: budget.scope,
        period: budget.period,
        measure: budget.measure,
        limit: inUnits(budget, budget.limit),
        spent: inUnits(budget, spent),
        remaining: inUnits(budget, Math.max(0, budget.limit - spent)),
        resets_at: new Date(windowOf(periods, budget.period).endsAt).toISOString(),
      };
    }),
    problems,
  });
}

/** The project's governance entries, in the order stored, each as `{name, value}`. */
function governanceSettings(project: Project): { name: string; value: string | null }[] {
  return (project.setting ?? []).filter((entry) => isGovernanceSetting(entry.name)).map((entry) => ({ name: entry.name, value: settingValueText(entry) ?? null }));
}

/** What a turn about a patient does on each model the project offers. */
function modelTreatments(services: Pick<ChatServices, 'models' | 'patientData'>, project: Project): { id: string; patient_data: string }[] {
  try {
    const catalog = modelCatalogFor(services.models, project);
    const fields = patientDataFieldsFor(services.patientData, project, catalog);
    return catalog.list().map((model) => ({ id: model.id, ...fields(model.id) }));
  } catch {
    // The project's model list does not parse: the problem is the chat routes' 503, and there is nothing to list.
    return [];
  }
}

function readOrNote<T>(problems: { setting: string; message: string }[], read: () => T): T | undefined {
  try {
    return read();
  } catch (error) {
    if (AppError.isInstance(error) && error.code === 'not_configured') {
      problems.push({ setting: String(error.details?.setting ?? ''), message: error.message });
      return undefined;
    }
    throw error;
  }
}

/** Tokens as they are; a cost budget's nano-dollars in US dollars. */
function inUnits(budget: Pick<Budget, 'measure'>, amount: number): number {
  return budget.measure === 'cost' ? amount / NANO_PER_DOLLAR : amount;
}

