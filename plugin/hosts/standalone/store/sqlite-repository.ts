/**
 * The standalone host's system-level FHIR store: a FhirRepository over one SQLite file (or ':memory:').
 *
 * No project scoping and no AccessPolicy here: the repository layered on top does that and sets the server-owned
 * meta (project, author, compartment), which this store keeps as given. Every write is atomic (current version,
 * history row and search index rows together); the writes of concurrent requests share one transaction and one
 * fsync (group-commit.ts), and a write's promise resolves once it is durable. Errors are OperationOutcomeErrors
 * with the outcomes Medplum's server uses, so FhirRouter answers with the same HTTP statuses.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { DatabaseSync } from 'node:sqlite';
import {
  OperationOutcomeError,
  Operator,
  allOk,
  badRequest,
  deepEquals,
  getResourceTypes,
  getStatus,
  gone,
  normalizeOperationOutcome,
  notFound,
  preconditionFailed,
  serverError,
  stringify,
  validateResource,
  validateResourceType,
  type SearchRequest,
  type WithId,
} from '@medplum/core';
import {
  FhirRepository,
  getExtraEntries,
  type CreateResourceOptions,
  type DeleteResourceOptions,
  type ReadHistoryOptions,
  type RepositoryMode,
  type SearchOptions,
  type TransactionOptions,
  type UpdateResourceOptions,
} from '@medplum/fhir-router';
import type { Bundle, BundleEntry, OperationOutcome, Reference, Resource } from '@medplum/fhirtypes';
import { AppError } from '../../../errors.ts';
import { outcomeOf } from '../../../medplum-errors.ts';
import { loadFhirDefinitions } from '../fhir-definitions.ts';
import { applyResourcePatch, type PatchOperations } from './apply-patch.ts';
import { AsyncMutex } from './async-mutex.ts';
import { GroupCommit, type GroupCommitOptions } from './group-commit.ts';
import { isDatabaseFilePath } from './owner-only-files.ts';
import { ResourceStore, type CurrentRow, type VersionRow, type VersionWrite } from './resource-store.ts';
import { openStoreDatabase, type StoreDatabaseOptions } from './schema.ts';
import { executeSearch } from './search-executor.ts';
import { SearchIndexSpec, type IndexedParameter } from './search-index.ts';
import { StoreFileIdentity } from './store-file-identity.ts';
import type { PolicyAlternative } from './search-plan.ts';
import { WalCheckpointer } from './wal-checkpointer.ts';
import { WalSync } from './wal-sync.ts';

/** How to open a {@link SqliteRepository}. */
export interface SqliteRepositoryOptions extends StoreDatabaseOptions {
  /** Builds `Bundle.entry.fullUrl` for search and history entries; without it, entries have no fullUrl. */
  readonly fullUrl?: (resourceType: string, id: string) => string;
  /** How concurrent writes are grouped into one commit. */
  readonly groupCommit?: GroupCommitOptions;
}

interface TransactionScope {
  active: boolean;
}

/** History pages hold this many versions unless the caller asks otherwise (as on Medplum's server). */
const DEFAULT_HISTORY_LIMIT = 100;
const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;
const NO_PARAMETERS: ReadonlyMap<string, IndexedParameter> = new Map();

/** A FhirRepository persisted in SQLite; open with {@link SqliteRepository.open}, release with `close()`. */
export class SqliteRepository extends FhirRepository {
  readonly #database: DatabaseSync;
  readonly #store: ResourceStore;
  readonly #index: SearchIndexSpec;
  readonly #fullUrl: SqliteRepositoryOptions['fullUrl'];
  readonly #mutex = new AsyncMutex();
  readonly #transaction = new AsyncLocalStorage<TransactionScope>();
  readonly #groupCommit: GroupCommit;
  readonly #walSync: WalSync | undefined;
  readonly #checkpointer: WalCheckpointer | undefined;
  readonly #files: StoreFileIdentity | undefined;

  private constructor(
    database: DatabaseSync,
    options: SqliteRepositoryOptions,
    walSync: WalSync | undefined,
    checkpointer: WalCheckpointer | undefined,
    files: StoreFileIdentity | undefined
  ) {
    super();
    this.#database = database;
    this.#checkpointer = checkpointer;
    this.#files = files;
    this.#store = new ResourceStore(database);
    this.#walSync = walSync;
    this.#groupCommit = new GroupCommit(this.#store, this.#mutex, {
      sync: walSync,
      checkpoint: checkpointer,
      verify: files ? () => files.check() : undefined,
      ...options.groupCommit,
    });
    this.#index = new SearchIndexSpec();
    this.#fullUrl = options.fullUrl;
    this.#store.registerParams(this.#index.rowParams());
    this.#store.registerTypes(getResourceTypes());
    this.#store.ensureIndex(this.#index.fingerprint, (content) => this.#index.rowsFor(JSON.parse(content) as Resource));
    // The schema's migration and the index are on disk before the first request.
    walSync?.syncNow();
  }

  /**
   * Opens the store at `path` (created with its schema if missing), or ':memory:' for a private in-memory one.
   * `synchronous=FULL` (the default) is kept by the store itself: SQLite commits at NORMAL, and the log is synced on
   * the thread pool before a write is acknowledged or any request reads what it wrote (wal-sync.ts, group-commit.ts).
   * A store file's checkpoints run on a worker thread's own connection (wal-checkpointer.ts); if that worker fails,
   * SQLite's automatic checkpoint takes over. A store file whose path stops naming it (the data folder deleted, the
   * file replaced) fails every operation from then on with `unavailable` (store-file-identity.ts).
   */
  static open(path: string, options: SqliteRepositoryOptions = {}): SqliteRepository {
    loadFhirDefinitions();
    const isFile = isDatabaseFilePath(path);
    const syncsItself = isFile && (options.synchronous ?? 'FULL') === 'FULL';
    const database = openStoreDatabase(path, syncsItself ? { ...options, synchronous: 'NORMAL' } : options);
    let walSync: WalSync | undefined;
    let checkpointer: WalCheckpointer | undefined;
    try {
      walSync = syncsItself ? WalSync.open(path) : undefined;
      const files = isFile ? StoreFileIdentity.of(path) : undefined;
      if (isFile) {
        database.exec('PRAGMA wal_autocheckpoint = 0');
        checkpointer = new WalCheckpointer(path, { onFailure: () => resumeAutomaticCheckpoints(database) });
      }
      return new SqliteRepository(database, options, walSync, checkpointer, files);
    } catch (error) {
      checkpointer?.close();
      walSync?.close();
      database.close();
      throw error;
    }
  }

  /**
   * Commits the writes waiting for their group and makes them durable, then closes the database; a transaction
   * still open is rolled back.
   */
  close(): void {
    if (this.#database.isOpen) {
      this.#groupCommit.flushNow();
      // The worker's connection closes first, so that this one, the last, checkpoints the log and removes it.
      this.#checkpointer?.close();
      this.#database.close();
      this.#walSync?.close();
    }
  }

  /**
   * Throws `unavailable` when the store's file is no longer where it was opened (deleted or replaced), and from then
   * on every operation fails so: for the health check, which may come before any write notices.
   */
  checkStorage(): void {
    try {
      this.#files?.check();
    } catch (error) {
      this.#groupCommit.fail(error);
      throw error;
    }
  }

  /** COMMITs so far, each one sync of the log in a durable store; a group of concurrent writes counts once. For tests and metrics. */
  get commitCount(): number {
    return this.#store.commitCount;
  }

  setMode(_mode: RepositoryMode): void {
    // One connection serves reads and writes.
  }

  generateId(): string {
    return randomUUID();
  }

  async createResource<T extends Resource>(resource: T, options?: CreateResourceOptions): Promise<WithId<T>> {
    validateResourceType(resource.resourceType);
    const id = options?.assignedId && resource.id ? resource.id : this.generateId();
    if (!FHIR_ID.test(id)) {
      throw new OperationOutcomeError(badRequest('Invalid id', `${resource.resourceType}.id`));
    }
    validateResource({ ...resource, id });
    // Serialised and indexed now, outside the write lock, and safe from changes the caller makes meanwhile.
    const version = this.#guardStorage(() => this.#newVersion({ ...resource, id }));
    return this.#write(() => {
      if (this.#store.insertVersion(version.write) === undefined) {
        throw new OperationOutcomeError(badRequest('Assigned ID is already in use'));
      }
      return version.resource;
    });
  }

  async readResource<T extends Resource>(resourceType: string, id: string): Promise<WithId<T>> {
    validateResourceType(resourceType);
    return this.#read(() => parseContent<T>(this.#requireLive(resourceType, id)));
  }

  async readReference<T extends Resource>(reference: Reference<T>): Promise<WithId<T>> {
    const parts = reference.reference?.split('/');
    if (parts?.length !== 2 || !parts[0] || !parts[1]) {
      throw new OperationOutcomeError(badRequest('Invalid reference'));
    }
    return this.readResource<T>(parts[0], parts[1]);
  }

  async readReferences<T extends Resource>(references: readonly Reference<T>[]): Promise<(T | Error)[]> {
    return Promise.all(
      references.map((reference) =>
        this.readReference(reference).catch((error: unknown) =>
          outcomeOf(error) ? (error as Error) : new OperationOutcomeError(normalizeOperationOutcome(error))
        )
      )
    );
  }

  async readHistory<T extends Resource>(
    resourceType: string,
    id: string,
    options?: ReadHistoryOptions
  ): Promise<Bundle<WithId<T>>> {
    validateResourceType(resourceType);
    const rows = await this.#read(() => {
      const current = this.#requireExisting(resourceType, id);
      return this.#store.history(current.pk, options?.limit ?? DEFAULT_HISTORY_LIMIT, options?.offset ?? 0);
    });
    return {
      resourceType: 'Bundle',
      type: 'history',
      entry: rows.map((row) => this.#historyEntry<T>(resourceType, id, row)),
    };
  }

  async readVersion<T extends Resource>(resourceType: string, id: string, versionId: string): Promise<WithId<T>> {
    validateResourceType(resourceType);
    return this.#read(() => {
      const current = this.#requireExisting(resourceType, id);
      const version = this.#store.version(current.pk, versionId);
      if (!version) {
        throw new OperationOutcomeError(notFound);
      }
      if (version.content === undefined) {
        throw new OperationOutcomeError(gone);
      }
      return JSON.parse(version.content) as WithId<T>;
    });
  }

  async updateResource<T extends Resource>(resource: T, options?: UpdateResourceOptions): Promise<WithId<T>> {
    validateResourceType(resource.resourceType);
    const id = resource.id;
    if (!id) {
      throw new OperationOutcomeError(badRequest('Missing id'));
    }
    validateResource({ ...resource, id });
    // A copy taken now: the write may run later, in its group, after the caller changed its object.
    const snapshot = this.#guardStorage(() => JSON.parse(stringify({ ...resource, id })) as WithId<T>);
    const ifMatch = options?.ifMatch;
    return this.#write(() => this.#updateNow(snapshot, ifMatch));
  }

  async patchResource<T extends Resource>(
    resourceType: T['resourceType'],
    id: string,
    patch: PatchOperations,
    options?: UpdateResourceOptions
  ): Promise<WithId<T>> {
    validateResourceType(resourceType);
    const ifMatch = options?.ifMatch;
    return this.#write(() => {
      const resource = parseContent<T>(this.#requireLive(resourceType, id));
      applyResourcePatch(resource, patch);
      if (resource.resourceType !== resourceType || resource.id !== id) {
        throw new OperationOutcomeError(badRequest('A patch cannot change the resource type or id'));
      }
      return this.#updateNow(resource, ifMatch);
    });
  }

  async deleteResource(resourceType: string, id: string, options?: DeleteResourceOptions): Promise<void> {
    validateResourceType(resourceType);
    const ifMatch = options?.ifMatch;
    await this.#write(() => {
      const current = this.#requireLive(resourceType, id);
      if (ifMatch && ifMatch !== current.versionId) {
        throw new OperationOutcomeError(preconditionFailed);
      }
      this.#store.markDeleted(current.pk, this.generateId(), new Date().toISOString());
    });
  }

  async search<T extends Resource>(
    searchRequest: SearchRequest<T>,
    _options?: SearchOptions
  ): Promise<Bundle<WithId<T>>> {
    return this.#search(searchRequest, undefined);
  }

  /**
   * A search narrowed by an AccessPolicy, decided here rather than one resource at a time: only resources that
   * satisfy some alternative (a rule of the policy for the type) match, exactly as Medplum's matcher would decide
   * each. Reads about one page of candidates when an index answers the search in its order.
   */
  async searchWithinPolicy<T extends Resource>(searchRequest: SearchRequest<T>, alternatives: readonly PolicyAlternative[]): Promise<Bundle<WithId<T>>> {
    return this.#search(searchRequest, alternatives);
  }

  async #search<T extends Resource>(searchRequest: SearchRequest<T>, alternatives: readonly PolicyAlternative[] | undefined): Promise<Bundle<WithId<T>>> {
    const { resourceType } = searchRequest;
    const current = await this.#read(() => this.#indexIsCurrent());
    const indexed = current ? this.#index.parametersFor(resourceType) : NO_PARAMETERS;
    const page = await executeSearch(
      { rows: this.#store, read: (work) => this.#read(work) },
      indexed,
      searchRequest,
      alternatives,
      (filter, sort) => (current ? this.#index.sortedLookupFor(resourceType, filter, sort) : undefined)
    );
    const entries: BundleEntry[] = page.resources.map((resource) => ({
      ...this.#fullUrlOf(resource),
      search: { mode: 'match' },
      resource,
    }));
    if ((searchRequest.include?.length || searchRequest.revInclude?.length) && entries.length > 0) {
      await getExtraEntries(this, searchRequest, page.resources, entries, { fullUrl: this.#fullUrl });
    }
    return {
      resourceType: 'Bundle',
      type: 'searchset',
      ...(entries.length > 0 ? { entry: entries as BundleEntry<WithId<T>>[] } : undefined),
      ...(page.total !== undefined ? { total: page.total } : undefined),
    };
  }

  async searchByReference<T extends Resource>(
    searchRequest: SearchRequest<T>,
    referenceField: string,
    references: string[]
  ): Promise<Record<string, WithId<T>[]>> {
    const results: Record<string, WithId<T>[]> = {};
    for (const reference of references) {
      const filter = { code: referenceField, operator: Operator.EQUALS, value: reference };
      const filters = [...(searchRequest.filters ?? []), filter];
      results[reference] = await this.searchResources<T>({ ...searchRequest, filters });
    }
    return results;
  }

  /**
   * Runs `callback` in one SQLite transaction of its own: committed when it resolves, rolled back when it throws.
   * Calls made from inside it (any depth) run in it at once, each write in a savepoint. Reads from outside wait
   * until it ends (they never see its uncommitted rows); writes from outside are grouped and committed after it.
   */
  async withTransaction<TResult>(
    callback: (transactionRepo: this) => Promise<TResult>,
    _options?: TransactionOptions
  ): Promise<TResult> {
    if (this.#inTransaction()) {
      return callback(this);
    }
    const release = await this.#mutex.acquire();
    const scope: TransactionScope = { active: true };
    try {
      // Holding the connection, no group commits: once the sync in flight returned, the transaction reads only durable rows.
      await this.#synced();
      this.#guardStorage(() => this.#store.begin());
      try {
        const result = await this.#transaction.run(scope, () => callback(this));
        this.#guardStorage(() => this.#store.commit());
        // Durable before it resolves, and before the connection is released to readers.
        await this.#groupCommit.afterCommit().catch((error: unknown) => {
          throw toStoreError(error);
        });
        return result;
      } catch (error) {
        try {
          this.#store.rollback();
        } catch {
          // The callback's error says what went wrong; a failed rollback leaves nothing committed anyway.
        }
        throw error;
      }
    } finally {
      scope.active = false;
      release();
    }
  }

  #updateNow<T extends Resource>(resource: WithId<T>, ifMatch: string | undefined): WithId<T> {
    const current = this.#store.findCurrent(resource.resourceType, resource.id);
    if (!current) {
      throw new OperationOutcomeError(notFound);
    }
    if (ifMatch && ifMatch !== current.versionId) {
      throw new OperationOutcomeError(preconditionFailed);
    }
    if (current.content !== undefined) {
      // As on Medplum's server, an update that changes nothing keeps the current version.
      const existing = JSON.parse(current.content) as WithId<T>;
      if (deepEquals(existing, JSON.parse(stringify(resource)))) {
        return existing;
      }
    }
    const version = this.#newVersion(resource);
    this.#store.replaceVersion(current.pk, version.write);
    return version.resource;
  }

  /** The stored form of a new version: fresh versionId and lastUpdated, every other meta field as given. */
  #newVersion<T extends Resource>(resource: WithId<T>): { resource: WithId<T>; write: VersionWrite } {
    const versionId = this.generateId();
    const lastUpdated = new Date().toISOString();
    const content = stringify({ ...resource, meta: { ...resource.meta, versionId, lastUpdated } });
    const stored = JSON.parse(content) as WithId<T>;
    return {
      resource: stored,
      write: {
        resourceType: stored.resourceType,
        id: stored.id,
        versionId,
        lastUpdated,
        project: stored.meta?.project?.toLowerCase(),
        content,
        indexRows: this.#index.rowsFor(stored),
      },
    };
  }

  #requireExisting(resourceType: string, id: string): CurrentRow {
    const current = this.#store.findCurrent(resourceType, id);
    if (!current) {
      throw new OperationOutcomeError(notFound);
    }
    return current;
  }

  #requireLive(resourceType: string, id: string): CurrentRow {
    const current = this.#requireExisting(resourceType, id);
    if (current.deleted) {
      throw new OperationOutcomeError(gone);
    }
    return current;
  }

  /** False when another process re-indexed the file for another parameter list: then the index is not trusted. */
  #indexIsCurrent(): boolean {
    return this.#store.indexMatches(this.#index.fingerprint);
  }

  #historyEntry<T extends Resource>(resourceType: string, id: string, row: VersionRow): BundleEntry<WithId<T>> {
    const outcome: OperationOutcome =
      row.content === undefined
        ? {
            resourceType: 'OperationOutcome',
            id: 'gone',
            issue: [{ severity: 'error', code: 'deleted', details: { text: 'Deleted on ' + row.lastUpdated } }],
          }
        : allOk;
    return {
      ...this.#fullUrlOf({ resourceType, id }),
      request: { method: 'GET', url: `${resourceType}/${id}/_history/${row.versionId}` },
      response: { status: getStatus(outcome).toString(), outcome },
      ...(row.content !== undefined ? { resource: JSON.parse(row.content) as WithId<T> } : undefined),
    };
  }

  #fullUrlOf(resource: { resourceType: string; id: string }): { fullUrl?: string } {
    return this.#fullUrl ? { fullUrl: this.#fullUrl(resource.resourceType, resource.id) } : {};
  }

  #inTransaction(): boolean {
    return this.#transaction.getStore()?.active === true;
  }

  /**
   * Runs a read now, or once the database holds only durable rows: after the transaction in progress when called
   * from outside it, and after the sync of the last commit (group-commit.ts). The check and the read are one
   * synchronous step, so nothing commits between them.
   */
  async #read<T>(work: () => T): Promise<T> {
    if (this.#inTransaction()) {
      return this.#guardStorage(work);
    }
    while (!this.#mutex.isLocked) {
      if (this.#groupCommit.readable) {
        return this.#guardStorage(work);
      }
      await this.#synced();
    }
    // Behind the transaction in progress, holding the connection: no group commits meanwhile, so one sync is all
    // there may be to wait for.
    return this.#mutex.runExclusive(async () => {
      while (!this.#groupCommit.readable) {
        await this.#synced();
      }
      return this.#guardStorage(work);
    });
  }

  /** Waits for the sync in flight, if any; a failed sync fails the caller as a storage failure. */
  async #synced(): Promise<void> {
    try {
      await this.#groupCommit.whenSynced();
    } catch (error) {
      throw toStoreError(error);
    }
  }

  /**
   * Runs a write atomically. Inside `withTransaction` it runs now, in a savepoint of that transaction. Otherwise it
   * joins this event-loop turn's group and resolves once the group's COMMIT returned: a resolved write is durable.
   * The chat route answers only after its own writes resolved, so it never answers with a turn that then failed
   * to commit.
   */
  async #write<T>(work: () => T): Promise<T> {
    if (this.#inTransaction()) {
      return this.#guardStorage(() => this.#store.atomically(work));
    }
    try {
      return await this.#groupCommit.write(work);
    } catch (error) {
      throw toStoreError(error);
    }
  }

  /** FHIR outcomes pass through; a storage failure becomes a 500 without SQLite's text in the response. */
  #guardStorage<T>(work: () => T): T {
    try {
      return work();
    } catch (error) {
      throw toStoreError(error);
    }
  }
}

/**
 * FHIR outcomes and the store's own refusals (`unavailable` when its file is gone) as they are; anything else
 * (SQLite's errors) a 500 whose text does not leak SQLite's.
 */
function toStoreError(error: unknown): Error {
  if (outcomeOf(error) || AppError.isInstance(error)) {
    return error as Error;
  }
  return new OperationOutcomeError(serverError(new Error('The FHIR store could not complete the operation')), {
    cause: error,
  });
}

function parseContent<T extends Resource>(current: CurrentRow): WithId<T> {
  if (current.content === undefined) {
    throw new OperationOutcomeError(gone);
  }
  return JSON.parse(current.content) as WithId<T>;
}

/** SQLite's own checkpoint, inside the COMMIT that takes the log past 1,000 pages (its default). */
function resumeAutomaticCheckpoints(database: DatabaseSync): void {
  if (database.isOpen) {
    database.exec('PRAGMA wal_autocheckpoint = 1000');
  }
}
