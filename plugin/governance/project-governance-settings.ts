/**
 * A project's governance settings, kept where Medplum keeps a project's configuration (`Project.setting`), so a
 * project administrator sets them in the Medplum app (Project → Settings) and they apply at the next request:
 *
 *   AI_MODEL_ACCESS                    `all` (default): every model of the project; `access-policy`: each user
 *                                      only the models the AccessPolicies of their membership grant (model-access.ts)
 *   AI_BUDGET_<SCOPE>_<PERIOD>_TOKENS  a token budget: SCOPE `PROJECT` or `USER` (each user of the project),
 *                                      PERIOD `DAY` or `MONTH` (UTC); prompt and completion tokens together
 *   AI_BUDGET_<SCOPE>_<PERIOD>_COST    a cost budget in US dollars, counted with the models' prices
 *   AI_MODEL_PRICES                    the project's own prices, `provider/model=<input>/<output>` per 1M tokens
 *
 * Parsed once per version of the project (`ProjectGovernanceSettings`), so a turn pays a lookup, not a parse.
 */
import type { Project, ProjectSetting } from '@medplum/fhirtypes';
import { LRUCache } from 'lru-cache';
import { AppError } from '../errors.ts';
import { modelPricesOf, NANO_PER_DOLLAR, parsePriceList, type ModelPrices } from './model-prices.ts';
import { misconfiguredSetting, projectSettingText, projectVersionKey } from '../project-settings.ts';

/** Names of the Project.setting entries governance reads. */
export const GOVERNANCE_SETTING = { modelAccess: 'AI_MODEL_ACCESS', prices: 'AI_MODEL_PRICES', budgetPrefix: 'AI_BUDGET_' } as const;

/** Who may use which model: every member every model of the project, or what their AccessPolicies grant. */
export type ModelAccessMode = 'all' | 'access-policy';

/** Whose spend a budget counts: the whole project's, or each user's own. */
export type BudgetScope = 'project' | 'user';
/** A budget's period, in UTC. */
export type BudgetPeriod = 'day' | 'month';
/** What a budget counts: tokens (prompt and completion), or cost in nano-dollars. */
export type BudgetMeasure = 'tokens' | 'cost';

/** One budget of a project. */
export interface Budget {
  readonly scope: BudgetScope;
  readonly period: BudgetPeriod;
  readonly measure: BudgetMeasure;
  /** Tokens, or nano-dollars for a cost budget. */
  readonly limit: number;
  /** The setting it comes from, e.g. `AI_BUDGET_USER_DAY_TOKENS`. */
  readonly setting: string;
}

/** A project's governance, parsed. */
export interface ProjectGovernance {
  readonly modelAccess: ModelAccessMode;
  readonly budgets: readonly Budget[];
  /** Prices by model: the project's own over the operator's. */
  readonly prices: ModelPrices;
}

const SCOPES: readonly BudgetScope[] = ['project', 'user'];
const PERIODS: readonly BudgetPeriod[] = ['day', 'month'];
const MEASURES: readonly BudgetMeasure[] = ['tokens', 'cost'];

/** The setting name of a budget, e.g. `AI_BUDGET_PROJECT_MONTH_COST`. */
export function budgetSettingName(scope: BudgetScope, period: BudgetPeriod, measure: BudgetMeasure): string {
  return `${GOVERNANCE_SETTING.budgetPrefix}${scope}_${period}_${measure}`.toUpperCase();
}

/**
 * Reads a project's governance settings, over the operator's prices. Parsed once per version of a project (its id
 * and `meta.versionId`: a version never changes, and a host such as Medplum hands over a new Project object on every
 * request), or once per Project object when the host gives no version.
 */
export class ProjectGovernanceSettings {
  readonly #operatorPrices: ModelPrices;
  readonly #byVersion = new LRUCache<string, ProjectGovernance | AppError>({ max: VERSIONS_KEPT });
  readonly #byObject = new WeakMap<Project, ProjectGovernance | AppError>();

  constructor(operatorPrices: ModelPrices) {
    this.#operatorPrices = operatorPrices;
  }

  /** The project's governance. Throws AppError `not_configured` (503) naming a setting that does not parse. */
  of(project: Project): ProjectGovernance {
    const version = projectVersionKey(project);
    let parsed = version === undefined ? this.#byObject.get(project) : this.#byVersion.get(version);
    if (parsed === undefined) {
      parsed = parseOrError(project.setting ?? [], this.#operatorPrices);
      if (version === undefined) {
        this.#byObject.set(project, parsed);
      } else {
        this.#byVersion.set(version, parsed);
      }
    }
    if (AppError.isInstance(parsed)) {
      throw parsed;
    }
    return parsed;
  }
}

/** Project versions whose governance is kept; the least recently used goes first. */
const VERSIONS_KEPT = 1_000;

function parseOrError(settings: readonly ProjectSetting[], operatorPrices: ModelPrices): ProjectGovernance | AppError {
  try {
    return parseProjectGovernance(settings, operatorPrices);
  } catch (error) {
    if (AppError.isInstance(error)) {
      return error;
    }
    throw error;
  }
}

/** Parses the governance settings of a project (exported for tests). */
export function parseProjectGovernance(settings: readonly ProjectSetting[], operatorPrices: ModelPrices): ProjectGovernance {
  const modelAccess = readModelAccess(settings);
  const budgets: Budget[] = [];
  for (const scope of SCOPES) {
    for (const period of PERIODS) {
      for (const measure of MEASURES) {
        const setting = budgetSettingName(scope, period, measure);
        const value = readNumber(settings, setting);
        if (value !== undefined) {
          budgets.push({ scope, period, measure, setting, limit: measure === 'cost' ? Math.round(value * NANO_PER_DOLLAR) : value });
        }
      }
    }
  }
  const unknown = settings.find((entry) => entry.name.startsWith(GOVERNANCE_SETTING.budgetPrefix) && !budgets.some((budget) => budget.setting === entry.name));
  if (unknown) {
    throw misconfiguredSetting(unknown.name, `is not a budget fhirgate knows (AI_BUDGET_<PROJECT|USER>_<DAY|MONTH>_<TOKENS|COST>)`);
  }
  const projectPrices = projectSettingText(settings, GOVERNANCE_SETTING.prices);
  const prices: ModelPrices =
    projectPrices === undefined
      ? operatorPrices
      : new Map([...operatorPrices, ...modelPricesOf(parsePriceList(projectPrices, `The project setting ${GOVERNANCE_SETTING.prices}`))]);
  return { modelAccess, budgets, prices };
}

function readModelAccess(settings: readonly ProjectSetting[]): ModelAccessMode {
  const value = projectSettingText(settings, GOVERNANCE_SETTING.modelAccess)?.toLowerCase();
  if (value === undefined || value === 'all') {
    return 'all';
  }
  if (value === 'access-policy') {
    return 'access-policy';
  }
  throw misconfiguredSetting(GOVERNANCE_SETTING.modelAccess, `is '${value.slice(0, 60)}'; it must be 'all' or 'access-policy'`);
}

/** A setting's number: `valueInteger`, `valueDecimal` or a `valueString` holding one; at least 0. */
function readNumber(settings: readonly ProjectSetting[], name: string): number | undefined {
  const entry = settings.find((candidate) => candidate.name === name);
  if (entry === undefined) {
    return undefined;
  }
  const raw = entry.valueInteger ?? entry.valueDecimal ?? (entry.valueString?.trim() ? Number(entry.valueString.trim().replaceAll('_', '')) : undefined);
  if (raw === undefined || !Number.isFinite(raw) || raw < 0) {
    throw misconfiguredSetting(name, 'must be a number of at least 0 (tokens, or US dollars for a cost budget)');
  }
  return raw;
}
