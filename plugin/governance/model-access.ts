/**
 * Who may use which model, per project, granted by AccessPolicies. In a project whose `AI_MODEL_ACCESS` setting is
 * `access-policy`, a caller may use the models that the AccessPolicies of their membership (its `accessPolicy` and
 * every `access[]` entry) grant, and no other: each policy lists them in extensions
 *
 *   { "url": "urn:fhirgate:extension:ai-models", "valueString": "openai/gpt-4o-mini, claude/*" }
 *
 * (`provider/model`, `provider/*` for all of a provider's models, `*` for all). The project's own list of models
 * still bounds them. Medplum administrators already give each team its policies and each member the team's
 * policies; the models a team may use become one more line of the same policy (docs/governance.md says why).
 *
 * The policies are read with the project's system rights; a grant older than `policyCacheMs` (5 s by default) is
 * read again, in the background while the policy is in use and before the request after a quiet spell, so an
 * edited policy applies within that bound (twice it at most) on every instance, with no restart; the membership and the project setting are read by the host with each request.
 */
import type { AccessPolicy, Project, ProjectMembership } from '@medplum/fhirtypes';
import type { FhirRepository } from '@medplum/fhir-router';
import { AppError } from '../errors.ts';
import type { CallerContext } from '../host.ts';
import type { ModelListEntry, ResolvedModel } from '../llm/model-registry.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import type { ProjectGovernance } from './project-governance-settings.ts';

/** The extension of an AccessPolicy that grants models. */
export const MODEL_GRANT_EXTENSION = 'urn:fhirgate:extension:ai-models';

/** The models one AccessPolicy grants. */
export interface ModelGrant {
  /** `*`: every model of the project. */
  readonly all: boolean;
  /** Providers granted whole (`provider/*`). */
  readonly providers: ReadonlySet<string>;
  /** `provider/model` ids. */
  readonly models: ReadonlySet<string>;
}

/** Whether a caller may use a model: always, or as their policies' grants say. */
export type ModelPermission = { readonly kind: 'all' } | { readonly kind: 'granted'; readonly grants: readonly ModelGrant[] };

/** How model access reads the policies. */
export interface ModelAccessOptions {
  /** The project's system repository (the host port's `getSystemRepo`). */
  readonly systemRepo: (projectId: string) => Promise<FhirRepository>;
  readonly telemetry: Telemetry;
  /** Longest a policy's grants are kept before it is read again. */
  readonly policyCacheMs: number;
  /** Most policies kept; the oldest go first. */
  readonly maxPolicies?: number;
  readonly now?: () => number;
}

interface CachedGrant {
  readonly grant: ModelGrant;
  readonly readAt: number;
}

const NO_GRANT: ModelGrant = { all: false, providers: new Set(), models: new Set() };
const EVERY_MODEL: ModelPermission = { kind: 'all' };
const DEFAULT_MAX_POLICIES = 10_000;

/** The models each caller may use. */
export class ModelAccess {
  readonly #options: ModelAccessOptions;
  readonly #grants = new Map<string, CachedGrant>();
  readonly #reading = new Map<string, Promise<ModelGrant>>();
  readonly #now: () => number;

  constructor(options: ModelAccessOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** What the caller may use, as the project's setting and the caller's policies say. */
  async permissionOf(caller: CallerContext, governance: ProjectGovernance): Promise<ModelPermission> {
    if (governance.modelAccess === 'all') {
      return EVERY_MODEL;
    }
    const policyIds = policyIdsOf(caller.membership);
    const grants: ModelGrant[] = [];
    for (const policyId of policyIds) {
      grants.push(await this.#grantOf(caller.project, policyId));
    }
    return { kind: 'granted', grants };
  }

  /**
   * The resolved model if the caller may use it, its fallbacks narrowed to those the caller may use too. Throws
   * AppError `model_not_allowed` (403) before anything is stored or sent.
   */
  async check(caller: CallerContext, governance: ProjectGovernance, requested: string | undefined, target: ResolvedModel): Promise<ResolvedModel> {
    const permission = await this.permissionOf(caller, governance);
    if (permission.kind === 'all') {
      return target;
    }
    if (!mayUse(permission, target.id)) {
      this.#options.telemetry.governanceRefusals.add(1, { 'fhirgate.governance.rule': 'model_access', 'fhirgate.project.id': caller.project.id, 'gen_ai.request.model': target.id });
      throw notAllowed(requested?.trim() ? `The model '${target.id}' is` : `No model was named, and the project's default model '${target.id}' is`);
    }
    return { ...target, fallbacks: target.fallbacks.filter((fallback) => mayUse(permission, fallback.id)) };
  }

  /** Throws AppError `model_not_allowed` (403) when the caller may not use the model `id` of the project's list. */
  async requireListed(caller: CallerContext, governance: ProjectGovernance, id: string): Promise<void> {
    if (!mayUse(await this.permissionOf(caller, governance), id)) {
      throw notAllowed(`The model '${id}' is`);
    }
  }

  /** The entries of a model list the caller may use. */
  async listFor<T extends Pick<ModelListEntry, 'id'>>(caller: CallerContext, governance: ProjectGovernance, entries: readonly T[]): Promise<readonly T[]> {
    const permission = await this.permissionOf(caller, governance);
    return permission.kind === 'all' ? entries : entries.filter((entry) => mayUse(permission, entry.id));
  }

  /**
   * A policy's grant. A grant older than `policyCacheMs` is read again in the background and the turn goes on with
   * the one it has (so no turn of a policy in use waits for it); a policy never read, or whose grant is more than
   * twice `policyCacheMs` old, is read first.
   */
  async #grantOf(project: Project, policyId: string): Promise<ModelGrant> {
    const key = `${project.id}\n${policyId}`;
    const cached = this.#grants.get(key);
    if (cached !== undefined && this.#now() - cached.readAt <= this.#options.policyCacheMs) {
      return cached.grant;
    }
    let reading = this.#reading.get(key);
    if (reading === undefined) {
      reading = this.#readGrant(project.id as string, policyId)
        .then((grant) => {
          this.#remember(key, grant);
          return grant;
        })
        .finally(() => this.#reading.delete(key));
      this.#reading.set(key, reading);
    }
    // While the policy is in use its grant is renewed in the background; after a quiet spell longer than the bound
    // (a grant more than twice `policyCacheMs` old) the request waits for the read, so it never sees an old grant.
    if (cached !== undefined && this.#now() - cached.readAt <= 2 * this.#options.policyCacheMs) {
      // A failed read leaves the grant as it was; the next turn tries again.
      reading.catch(() => undefined);
      return cached.grant;
    }
    return reading;
  }

  async #readGrant(projectId: string, policyId: string): Promise<ModelGrant> {
    const repo = await this.#options.systemRepo(projectId);
    try {
      return grantOf(await repo.readResource<AccessPolicy>('AccessPolicy', policyId));
    } catch (error) {
      // A membership that names a deleted policy is granted nothing by it, as Medplum grants it no access.
      if (isOutcomeStatus(error, 404, 410)) {
        return NO_GRANT;
      }
      throw error;
    }
  }

  #remember(key: string, grant: ModelGrant): void {
    this.#grants.delete(key);
    if (this.#grants.size >= (this.#options.maxPolicies ?? DEFAULT_MAX_POLICIES)) {
      this.#grants.delete(this.#grants.keys().next().value as string);
    }
    this.#grants.set(key, { grant, readAt: this.#now() });
  }
}

/** 403 for a model the caller's policies do not grant; `subject` names it. */
function notAllowed(subject: string): AppError {
  return new AppError('model_not_allowed', `${subject} not among the models your AccessPolicy grants in this project; GET /v1/models lists yours.`, {
    details: { param: 'model' },
  });
}

/** The models an AccessPolicy grants through its `ai-models` extensions (none without them). */
export function grantOf(policy: AccessPolicy): ModelGrant {
  const providers = new Set<string>();
  const models = new Set<string>();
  let all = false;
  for (const extension of policy.extension ?? []) {
    if (extension.url !== MODEL_GRANT_EXTENSION) {
      continue;
    }
    for (const item of (extension.valueString ?? '').split(',').map((part) => part.trim()).filter((part) => part !== '')) {
      if (item === '*') {
        all = true;
      } else if (item.endsWith('/*')) {
        providers.add(item.slice(0, -2));
      } else {
        models.add(item);
      }
    }
  }
  return { all, providers, models };
}

/** Whether any of the grants covers `modelId` (`provider/model`). */
export function mayUse(permission: ModelPermission, modelId: string): boolean {
  if (permission.kind === 'all') {
    return true;
  }
  const provider = modelId.slice(0, modelId.indexOf('/'));
  return permission.grants.some((grant) => grant.all || grant.models.has(modelId) || grant.providers.has(provider));
}

/** The ids of the membership's policies, once each: its `accessPolicy`, then its `access[]` entries'. */
function policyIdsOf(membership: ProjectMembership): string[] {
  const ids = new Set<string>();
  for (const reference of [membership.accessPolicy, ...(membership.access ?? []).map((entry) => entry.policy)]) {
    const id = reference?.reference?.startsWith('AccessPolicy/') ? reference.reference.slice('AccessPolicy/'.length) : undefined;
    if (id) {
      ids.add(id);
    }
  }
  return [...ids];
}
