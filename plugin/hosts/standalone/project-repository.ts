/**
 * The caller's repository: a view of the shared store limited to one project and checked against one
 * AccessPolicy, as Medplum's server `Repository` is for a login. Writes get `meta.project`, `meta.author` and
 * `meta.compartment` from here, never from the caller; a denied write throws 403 and stores nothing; reads of
 * what the policy hides are 404; searches return only what the policy allows.
 */
import {
  AccessPolicyInteraction,
  DEFAULT_MAX_SEARCH_COUNT,
  DEFAULT_SEARCH_COUNT,
  OperationOutcomeError,
  Operator,
  accessPolicySupportsInteraction,
  forbidden,
  isResourceType,
  notFound,
  parseReference,
  type SearchRequest,
  type WithId,
} from '@medplum/core';
import {
  FhirRepository,
  type CreateResourceOptions,
  type DeleteResourceOptions,
  type ReadHistoryOptions,
  type RepositoryMode,
  type SearchOptions,
  type TransactionOptions,
  type UpdateResourceOptions,
} from '@medplum/fhir-router';
import type { AccessPolicy, AccessPolicyResource, Bundle, BundleEntry, Meta, Reference, Resource } from '@medplum/fhirtypes';
import { compileAccessPolicy, type CompiledAccessPolicy } from './compiled-access-policy.ts';
import type { PolicyAlternative } from './store/search-plan.ts';

type PatchOperations = Parameters<FhirRepository['patchResource']>[2];

/** Who the repository acts for. */
export interface ProjectRepositoryOptions {
  readonly projectId: string;
  /** Written to `meta.author` of everything created or updated. */
  readonly author: Reference;
  /** The effective policy; undefined means system rights inside the project. */
  readonly accessPolicy?: AccessPolicy;
  /** Called after each write this repository makes (so what was derived from the written resource can be dropped). */
  readonly onWrite?: (resourceType: string) => void;
}

/** Searches that the policy narrows, on a store that cannot narrow them itself, read at most this many candidates before paging. */
const POLICY_SCAN_LIMIT = 10_000;

/** A store that narrows a search by an AccessPolicy itself (the standalone SQLite store). */
interface PolicyNarrowingStore {
  searchWithinPolicy<T extends Resource>(searchRequest: SearchRequest<T>, alternatives: readonly PolicyAlternative[]): Promise<Bundle<WithId<T>>>;
}

function narrowsByPolicy(store: FhirRepository): store is FhirRepository & PolicyNarrowingStore {
  return typeof (store as Partial<PolicyNarrowingStore>).searchWithinPolicy === 'function';
}

/** A FhirRepository limited to one project and one AccessPolicy, over a system-level store. */
export class ProjectRepository extends FhirRepository {
  readonly #store: FhirRepository;
  readonly #options: ProjectRepositoryOptions;
  readonly #policy: CompiledAccessPolicy | undefined;

  constructor(store: FhirRepository, options: ProjectRepositoryOptions) {
    super();
    this.#store = store;
    this.#options = options;
    this.#policy = options.accessPolicy ? compileAccessPolicy(options.accessPolicy) : undefined;
  }

  /** The project this repository is limited to. */
  get projectId(): string {
    return this.#options.projectId;
  }

  setMode(mode: RepositoryMode): void {
    this.#store.setMode(mode);
  }

  generateId(): string {
    return this.#store.generateId();
  }

  async createResource<T extends Resource>(resource: T, options?: CreateResourceOptions): Promise<WithId<T>> {
    this.#requireTypeInteraction(resource.resourceType, AccessPolicyInteraction.CREATE);
    // The id is fixed before the write (as Medplum does) so that compartments can name it.
    const id = options?.assignedId && resource.id ? resource.id : this.generateId();
    const prepared = this.#withServerMeta({ ...resource, id }, undefined);
    this.#requireSatisfied(prepared, AccessPolicyInteraction.CREATE);
    return this.#written(await this.#store.createResource(prepared, { ...options, assignedId: true }));
  }

  async readResource<T extends Resource>(resourceType: string, id: string): Promise<WithId<T>> {
    this.#requireTypeInteraction(resourceType, AccessPolicyInteraction.READ);
    const resource = await this.#store.readResource<T>(resourceType, id);
    return this.#visibleOrNotFound(resource, AccessPolicyInteraction.READ);
  }

  async readReference<T extends Resource>(reference: Reference<T>): Promise<WithId<T>> {
    const [resourceType, id] = parseReference(reference);
    return this.readResource<T>(resourceType, id);
  }

  async readReferences<T extends Resource>(references: readonly Reference<T>[]): Promise<(T | Error)[]> {
    return Promise.all(references.map((reference) => this.readReference(reference).catch((error: unknown) => toError(error))));
  }

  async readHistory<T extends Resource>(resourceType: string, id: string, options?: ReadHistoryOptions): Promise<Bundle<WithId<T>>> {
    this.#requireTypeInteraction(resourceType, AccessPolicyInteraction.HISTORY);
    const history = await this.#store.readHistory<T>(resourceType, id, options);
    const newest = history.entry?.find((entry) => entry.resource)?.resource;
    if (!newest) {
      throw new OperationOutcomeError(notFound);
    }
    this.#visibleOrNotFound(newest, AccessPolicyInteraction.HISTORY);
    return history;
  }

  async readVersion<T extends Resource>(resourceType: string, id: string, versionId: string): Promise<WithId<T>> {
    this.#requireTypeInteraction(resourceType, AccessPolicyInteraction.VREAD);
    const resource = await this.#store.readVersion<T>(resourceType, id, versionId);
    return this.#visibleOrNotFound(resource, AccessPolicyInteraction.VREAD);
  }

  async updateResource<T extends Resource>(resource: T, options?: UpdateResourceOptions): Promise<WithId<T>> {
    this.#requireTypeInteraction(resource.resourceType, AccessPolicyInteraction.UPDATE);
    if (!resource.id) {
      throw new OperationOutcomeError(notFound);
    }
    const existing = await this.#store.readResource<T>(resource.resourceType, resource.id);
    this.#visibleOrNotFound(existing, AccessPolicyInteraction.READ);
    this.#requireSatisfied(existing, AccessPolicyInteraction.UPDATE);
    const prepared = this.#withServerMeta(resource, existing.meta);
    this.#requireSatisfied(prepared, AccessPolicyInteraction.UPDATE);
    return this.#written(await this.#store.updateResource(prepared, options));
  }

  async patchResource<T extends Resource>(
    resourceType: T['resourceType'],
    id: string,
    patch: PatchOperations,
    options?: UpdateResourceOptions
  ): Promise<WithId<T>> {
    this.#requireTypeInteraction(resourceType, AccessPolicyInteraction.UPDATE);
    const existing = await this.#store.readResource<T>(resourceType, id);
    this.#visibleOrNotFound(existing, AccessPolicyInteraction.READ);
    this.#requireSatisfied(existing, AccessPolicyInteraction.UPDATE);
    // The patched result is checked inside the transaction, so a patch that leaves the caller's rights rolls back.
    const result = await this.#store.withTransaction(
      async (transaction) => {
        const patched = await transaction.patchResource<T>(resourceType, id, patch, options);
        if (patched.meta?.project !== this.projectId || patched.meta.author?.reference !== this.#options.author.reference) {
          return transaction.updateResource(this.#withServerMeta(patched, existing.meta));
        }
        this.#requireSatisfied(patched, AccessPolicyInteraction.UPDATE);
        return patched;
      },
      { resourceTypes: [resourceType] }
    );
    return this.#written(result);
  }

  async deleteResource(resourceType: string, id: string, options?: DeleteResourceOptions): Promise<void> {
    this.#requireTypeInteraction(resourceType, AccessPolicyInteraction.DELETE);
    const existing = await this.#store.readResource(resourceType, id);
    this.#visibleOrNotFound(existing, AccessPolicyInteraction.READ);
    this.#requireSatisfied(existing, AccessPolicyInteraction.DELETE);
    await this.#store.deleteResource(resourceType, id, options);
    this.#options.onWrite?.(resourceType);
  }

  async search<T extends Resource>(request: SearchRequest<T>, options?: SearchOptions): Promise<Bundle<WithId<T>>> {
    this.#requireTypeInteraction(request.resourceType, AccessPolicyInteraction.SEARCH);
    // As Medplum's server (fhir/search.ts): 20 results unless asked, and never more than 1,000 in one page.
    const searchRequest: SearchRequest<T> = { ...request, count: Math.min(request.count ?? DEFAULT_SEARCH_COUNT, DEFAULT_MAX_SEARCH_COUNT) };
    const scoped: SearchRequest<T> = {
      ...searchRequest,
      filters: [...(searchRequest.filters ?? []), { code: '_project', operator: Operator.EQUALS, value: this.projectId }],
    };
    const alternatives = this.#policy?.searchAlternatives(searchRequest.resourceType);
    let bundle: Bundle<WithId<T>>;
    if (!alternatives) {
      bundle = await this.#store.search(scoped, options);
    } else if (narrowsByPolicy(this.#store)) {
      // The store applies the policy's criteria with its index, reading about one page for a page.
      bundle = await this.#store.searchWithinPolicy(scoped, alternatives);
    } else {
      return this.#searchNarrowed(scoped, searchRequest, options);
    }
    // The matches are what the policy allows: the store selected them by its alternatives, or the policy allows
    // every resource of the type. Included resources are not narrowed by the store, so they are checked here.
    return { ...bundle, entry: this.#visibleEntries(bundle.entry, true) };
  }

  /**
   * On a store that cannot narrow a search by the policy, its criteria are evaluated per resource, so candidates
   * are read in batches (the first just large enough for the page, then doubling), the allowed ones kept, and
   * reading stops once the page is full. The total is given when every candidate was read (always, when the
   * request asks for one).
   */
  async #searchNarrowed<T extends Resource>(
    scoped: SearchRequest<T>,
    searchRequest: SearchRequest<T>,
    options: SearchOptions | undefined
  ): Promise<Bundle<WithId<T>>> {
    const offset = searchRequest.offset ?? 0;
    const count = searchRequest.count ?? DEFAULT_SEARCH_COUNT;
    const wantsTotal = searchRequest.total === 'accurate' || searchRequest.total === 'estimate';
    // Keyed by reference: a write between two batches can shift a candidate into the next one.
    const matches = new Map<string, BundleEntry<WithId<T>>>();
    const included = new Map<string, BundleEntry<WithId<T>>>();
    let read = 0;
    let batch = offset + count + 1;
    let exhausted = false;
    while (read < POLICY_SCAN_LIMIT && (wantsTotal || matches.size <= offset + count)) {
      const size = Math.min(batch, POLICY_SCAN_LIMIT - read);
      const candidates = await this.#store.search({ ...scoped, offset: read, count: size, total: 'none' }, options);
      const entries = candidates.entry ?? [];
      for (const entry of this.#visibleEntries(entries) ?? []) {
        const key = `${entry.resource?.resourceType}/${entry.resource?.id}`;
        (entry.search?.mode === 'include' ? included : matches).set(key, entry);
      }
      read += size;
      if (entries.filter((entry) => entry.search?.mode !== 'include').length < size) {
        exhausted = true;
        break;
      }
      batch *= 2;
    }
    const page = [...[...matches.values()].slice(offset, offset + count), ...included.values()];
    const total = exhausted || wantsTotal || read >= POLICY_SCAN_LIMIT ? matches.size : undefined;
    return { resourceType: 'Bundle', type: 'searchset', entry: page.length ? page : undefined, ...(total !== undefined ? { total } : undefined) };
  }

  async searchByReference<T extends Resource>(
    searchRequest: SearchRequest<T>,
    referenceField: string,
    references: string[]
  ): Promise<Record<string, WithId<T>[]>> {
    const result: Record<string, WithId<T>[]> = {};
    for (const reference of references) {
      const filters = [...(searchRequest.filters ?? []), { code: referenceField, operator: Operator.EQUALS, value: reference }];
      result[reference] = await this.searchResources({ ...searchRequest, filters });
    }
    return result;
  }

  async withTransaction<TResult>(callback: (transactionRepo: this) => Promise<TResult>, options: TransactionOptions): Promise<TResult> {
    return this.#store.withTransaction(
      (transactionStore) => callback(new ProjectRepository(transactionStore, this.#options) as this),
      options
    );
  }

  /**
   * The rule that allows `interaction` on `resource` as this repository would store it (undefined: refused), as
   * Medplum's `Repository.canPerformInteraction` answers: lets a caller ask before a write another write depends on.
   */
  canPerformInteraction(interaction: AccessPolicyInteraction, resource: Resource): AccessPolicyResource | undefined {
    if (resource.meta?.project !== undefined && resource.meta.project !== this.projectId) {
      return undefined;
    }
    if (!this.#policy) {
      return { resourceType: resource.resourceType };
    }
    const policy = this.#options.accessPolicy;
    if (policy && !accessPolicySupportsInteraction(policy, interaction, resource.resourceType)) {
      return undefined;
    }
    return this.#policy.satisfiedBy(this.#withServerMeta(resource, undefined), interaction);
  }

  #written<T extends Resource>(resource: WithId<T>): WithId<T> {
    this.#options.onWrite?.(resource.resourceType);
    return resource;
  }

  /** Server-owned meta: the project, the author and the compartments are set here, never taken from the caller. */
  #withServerMeta<T extends Resource>(resource: T, existingMeta: Meta | undefined): T {
    const projectReference = { reference: `Project/${this.projectId}` };
    const meta: Meta = {
      ...resource.meta,
      versionId: undefined,
      lastUpdated: undefined,
      project: this.projectId,
      author: this.#options.author,
      account: resource.meta?.account ?? existingMeta?.account,
      compartment: [projectReference, ...patientCompartments(resource)],
    };
    return { ...resource, meta };
  }

  #requireTypeInteraction(resourceType: string, interaction: AccessPolicyInteraction): void {
    const policy = this.#options.accessPolicy;
    if (!isResourceType(resourceType)) {
      throw new OperationOutcomeError(notFound);
    }
    if (policy && !accessPolicySupportsInteraction(policy, interaction, resourceType)) {
      throw new OperationOutcomeError(forbidden);
    }
  }

  #requireSatisfied(resource: Resource, interaction: AccessPolicyInteraction): void {
    if (this.#policy && !this.#policy.satisfiedBy(resource, interaction)) {
      throw new OperationOutcomeError(forbidden);
    }
  }

  #isVisible(resource: Resource, interaction: AccessPolicyInteraction): boolean {
    if (resource.meta?.project !== this.projectId) {
      return false;
    }
    return !this.#policy || this.#policy.satisfiedByStored(resource, interaction) !== undefined;
  }

  #visibleOrNotFound<T extends Resource>(resource: WithId<T>, interaction: AccessPolicyInteraction): WithId<T> {
    if (!this.#isVisible(resource, interaction)) {
      throw new OperationOutcomeError(notFound);
    }
    return resource;
  }

  #visibleEntries<T extends Resource>(
    entries: BundleEntry<WithId<T>>[] | undefined,
    matchesNarrowedByStore = false
  ): BundleEntry<WithId<T>>[] | undefined {
    const visible = entries?.filter(
      (entry) =>
        entry.resource &&
        ((matchesNarrowedByStore && entry.search?.mode === 'match') || this.#isVisible(entry.resource, AccessPolicyInteraction.SEARCH))
    );
    return visible?.length ? visible : undefined;
  }

}

/** The patient compartments a resource belongs to (the patient itself, or the patient it is about). */
function patientCompartments(resource: Resource): Reference[] {
  if (resource.resourceType === 'Patient') {
    return resource.id ? [{ reference: `Patient/${resource.id}` }] : [];
  }
  const candidates = [
    (resource as { subject?: Reference }).subject,
    (resource as { patient?: Reference }).patient,
  ];
  return candidates.filter((reference): reference is Reference => !!reference?.reference?.startsWith('Patient/'))
    .map((reference) => ({ reference: reference.reference }));
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
