/**
 * A repository that refuses the way a Medplum server's `Repository` does, built only from this consumer's own
 * copies of `@medplum/core` and `@medplum/fhir-router` (never fhirgate's): so every refusal fhirgate sees here is an
 * `OperationOutcomeError` of another copy than any fhirgate might bring along.
 * - AccessPolicy: a type the policy does not grant is 403; a resource outside its criteria reads as 404 and is
 *   left out of searches; a write outside them is 403 (Medplum's fhir/repo.ts).
 * - FHIR quota: reads cost 1 point, searches 20, writes 100 (Medplum's `FhirQuotaCost`); past the caller's
 *   limit a 429 whose diagnostics hold the limiter's state, as Medplum's fhirquota.ts throws it.
 * - `meta.project` and `meta.author` are set by the repository; every write is validated, and the validator's
 *   issues (warnings included) are kept for the test to read.
 * - `canPerformInteraction(interaction, resource)` answers as Medplum's does, before a write.
 * - Reads show the server-owned meta (`author`, `project`, `compartment`, `account`) in extended mode only.
 */
import { randomUUID } from 'node:crypto';
import {
  OperationOutcomeError,
  accessPolicySupportsInteraction,
  badRequest,
  forbidden,
  normalizeOperationOutcome,
  notFound,
  satisfiedAccessPolicy,
  tooManyRequests,
  validateResource,
  type WithId,
} from '@medplum/core';
import type { FhirRepository, MemoryRepository } from '@medplum/fhir-router';
import type { AccessPolicy, Bundle, OperationOutcomeIssue, Reference, Resource, ResourceType } from '@medplum/fhirtypes';
import type { SearchRequest } from '@medplum/core';

/** Who a repository acts for. */
export interface RepositoryContext {
  readonly projectId: string;
  readonly author: Reference;
  /** Undefined: everything in the project (Medplum's system repository, or a membership without a policy). */
  readonly accessPolicy?: AccessPolicy;
  /** Medplum's global system repository: every project's resources (fhirgate only reads the Project with it). */
  readonly superAdmin?: boolean;
  /**
   * Medplum's extended mode (`X-Medplum: extended`, or a repository the server builds with it): only then do reads
   * show `meta.author`, `meta.project`, `meta.compartment` and `meta.account` (Medplum's `removeHiddenFields`).
   */
  readonly extendedMode?: boolean;
  /** FHIR quota points per minute; undefined: no quota (Medplum's system repository has none). */
  readonly quota?: { readonly key: string; readonly limit: number };
}

/** Issues Medplum's validator raised on writes (a real server logs the warnings). */
export const validationIssues: { readonly resourceType: string; readonly issue: OperationOutcomeIssue }[] = [];

const usedPoints = new Map<string, { used: number; resetAt: number }>();

// What a SearchRequest for everything of a type looks like once fhirgate's own paging is taken off.
const UNPAGED = 1000;

/** A Medplum-like repository over `store` for one caller (or for the system). */
export function createMedplumLikeRepository(store: MemoryRepository, context: RepositoryContext): FhirRepository {
  const repository = new MedplumLikeRepository(store, context);
  // Anything else fhirgate or Medplum's GraphQL calls fails loudly rather than bypassing the policy.
  return new Proxy(repository, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (value === undefined && typeof property === 'string' && property !== 'then') {
        return () => {
          throw new Error(`The Medplum-like repository does not implement ${property}`);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as unknown as FhirRepository;
}

class MedplumLikeRepository {
  readonly #store: MemoryRepository;
  readonly #context: RepositoryContext;

  constructor(store: MemoryRepository, context: RepositoryContext) {
    this.#store = store;
    this.#context = context;
  }

  setMode(): void {}

  generateId(): string {
    return randomUUID();
  }

  async readResource<T extends Resource>(resourceType: string, id: string): Promise<WithId<T>> {
    this.#consume(1);
    this.#requireInteraction('read', resourceType);
    const resource = await this.#store.readResource<T>(resourceType, id).catch((error: unknown) => {
      throw error instanceof OperationOutcomeError ? error : new OperationOutcomeError(normalizeOperationOutcome(error));
    });
    if (!this.#visible(resource, 'read')) {
      throw new OperationOutcomeError(notFound);
    }
    return this.#shown(resource) as WithId<T>;
  }

  async readReference<T extends Resource>(reference: Reference<T>): Promise<WithId<T>> {
    const [resourceType, id] = (reference.reference ?? '').split('/');
    if (!resourceType || !id) {
      throw new OperationOutcomeError(badRequest('Invalid reference'));
    }
    return this.readResource<T>(resourceType, id);
  }

  async readReferences<T extends Resource>(references: readonly Reference<T>[]): Promise<(WithId<T> | Error)[]> {
    return Promise.all(references.map((reference) => this.readReference(reference).catch((error: Error) => error)));
  }

  async search<T extends Resource>(searchRequest: SearchRequest<T>): Promise<Bundle<WithId<T>>> {
    this.#consume(20);
    this.#requireInteraction('search', searchRequest.resourceType);
    const all = await this.#store.search({ ...searchRequest, count: UNPAGED, offset: 0 });
    const visible = (all.entry ?? []).filter((entry) => entry.resource && this.#visible(entry.resource, 'search'));
    const offset = searchRequest.offset ?? 0;
    const page = visible.slice(offset, offset + (searchRequest.count ?? 20)).map((entry) => ({ ...entry, resource: entry.resource && this.#shown(entry.resource) }));
    return { resourceType: 'Bundle', type: 'searchset', entry: page, total: searchRequest.total ? visible.length : undefined };
  }

  async searchResources<T extends Resource>(searchRequest: SearchRequest<T>): Promise<WithId<T>[]> {
    return ((await this.search(searchRequest)).entry ?? []).map((entry) => entry.resource as WithId<T>);
  }

  async searchOne<T extends Resource>(searchRequest: SearchRequest<T>): Promise<WithId<T> | undefined> {
    return (await this.searchResources({ ...searchRequest, count: 1 }))[0];
  }

  async searchByReference<T extends Resource>(searchRequest: SearchRequest<T>, referenceField: string, references: string[]): Promise<Record<string, WithId<T>[]>> {
    const result: Record<string, WithId<T>[]> = {};
    for (const reference of references) {
      result[reference] = await this.searchResources({ ...searchRequest, filters: [...(searchRequest.filters ?? []), { code: referenceField, operator: 'eq', value: reference }] } as SearchRequest<T>);
    }
    return result;
  }

  async createResource<T extends Resource>(resource: T, options?: { assignedId?: boolean }): Promise<WithId<T>> {
    this.#consume(100);
    const stamped = this.#stamp(resource);
    this.#requireWritable(stamped, 'create');
    return this.#store.createResource(stamped, options);
  }

  async updateResource<T extends Resource>(resource: T): Promise<WithId<T>> {
    this.#consume(100);
    const stamped = this.#stamp(resource);
    this.#requireWritable(stamped, 'update');
    return this.#store.updateResource(stamped);
  }

  async deleteResource(resourceType: string, id: string): Promise<void> {
    this.#consume(100);
    const existing = await this.#store.readResource(resourceType, id);
    this.#requireWritable(existing, 'delete');
    await this.#store.deleteResource(resourceType, id);
  }

  /** Medplum's `Repository.canPerformInteraction`: the policy rule that allows the interaction, or undefined. */
  canPerformInteraction(interaction: 'create' | 'update' | 'delete', resource: Resource): unknown {
    if (resource.meta?.project !== this.#context.projectId) {
      return undefined;
    }
    return satisfiedAccessPolicy(resource, interaction as never, this.#context.accessPolicy);
  }

  async conditionalCreate<T extends Resource>(resource: T, search: SearchRequest<T>): Promise<{ resource: WithId<T>; outcome: unknown }> {
    const existing = await this.searchOne(search);
    return existing ? { resource: existing, outcome: { resourceType: 'OperationOutcome', id: 'ok', issue: [] } } : { resource: await this.createResource(resource), outcome: { resourceType: 'OperationOutcome', id: 'created', issue: [] } };
  }

  async withTransaction<R>(callback: (repository: FhirRepository) => Promise<R>): Promise<R> {
    return callback(this as unknown as FhirRepository);
  }

  /** Medplum's `removeHiddenFields`: outside extended mode a reader does not see who wrote a record, nor its project. */
  #shown<T extends Resource>(resource: T): T {
    if (this.#context.extendedMode || !resource.meta) {
      return resource;
    }
    const { author: _author, project: _project, compartment: _compartment, account: _account, ...meta } = resource.meta;
    return { ...resource, meta };
  }

  #stamp<T extends Resource>(resource: T): T {
    const stamped = { ...resource, meta: { ...resource.meta, project: this.#context.projectId, author: this.#context.author } };
    for (const issue of validateResource(stamped)) {
      validationIssues.push({ resourceType: resource.resourceType, issue });
      if (issue.severity === 'error') {
        throw new OperationOutcomeError({ resourceType: 'OperationOutcome', issue: [issue] });
      }
    }
    return stamped;
  }

  #visible(resource: Resource, interaction: 'read' | 'search'): boolean {
    if (!this.#context.superAdmin && resource.meta?.project !== this.#context.projectId) {
      return false;
    }
    return !this.#context.accessPolicy || satisfiedAccessPolicy(resource, interaction, this.#context.accessPolicy) !== undefined;
  }

  #requireInteraction(interaction: 'read' | 'search', resourceType: string): void {
    if (this.#context.accessPolicy && !accessPolicySupportsInteraction(this.#context.accessPolicy, interaction, resourceType as ResourceType)) {
      throw new OperationOutcomeError(forbidden);
    }
  }

  #requireWritable(resource: Resource, interaction: 'create' | 'update' | 'delete'): void {
    const policy = this.#context.accessPolicy;
    if (policy && (!accessPolicySupportsInteraction(policy, interaction, resource.resourceType) || !satisfiedAccessPolicy(resource, interaction, policy))) {
      throw new OperationOutcomeError(forbidden);
    }
  }

  #consume(points: number): void {
    const quota = this.#context.quota;
    if (!quota) {
      return;
    }
    const now = Date.now();
    const state = usedPoints.get(quota.key);
    const current = state && state.resetAt > now ? state : { used: 0, resetAt: now + 60_000 };
    current.used += points;
    usedPoints.set(quota.key, current);
    if (current.used > quota.limit) {
      const limiterState = { _remainingPoints: 0, _msBeforeNext: current.resetAt - now, _consumedPoints: current.used, _isFirstInDuration: false, limit: quota.limit };
      throw new OperationOutcomeError({ ...tooManyRequests, issue: [{ ...tooManyRequests.issue[0], diagnostics: JSON.stringify(limiterState) }] });
    }
  }
}
