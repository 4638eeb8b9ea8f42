/**
 * Row-level access to the store's tables: every statement is prepared once and reused. No FHIR rules here;
 * the repository decides what to write and this class writes it.
 */
import type { DatabaseSync, SQLInputValue, SQLOutputValue, StatementSync } from 'node:sqlite';
import type { IndexRow } from './search-index.ts';

/** The current row of a resource. */
export interface CurrentRow {
  readonly pk: number;
  readonly versionId: string;
  readonly lastUpdated: string;
  readonly deleted: boolean;
  /** JSON of the current version; undefined once deleted. */
  readonly content: string | undefined;
}

/** One version of a resource. */
export interface VersionRow {
  readonly versionId: string;
  readonly lastUpdated: string;
  /** JSON of the version; undefined for a delete. */
  readonly content: string | undefined;
}

/** A version to store. */
export interface VersionWrite {
  readonly resourceType: string;
  readonly id: string;
  readonly versionId: string;
  readonly lastUpdated: string;
  /** Lower-cased `meta.project`, the value `_project` searches compare with. */
  readonly project: string | undefined;
  readonly content: string;
  readonly indexRows: readonly IndexRow[];
}

const INDEX_FINGERPRINT_KEY = 'search_index_fingerprint';
/**
 * A version's JSON: its history row's, or, for the current version (whose row holds NULL), the resource's. NULL
 * either way for a delete.
 */
const VERSION_COLUMNS =
  'h.version_id, h.last_updated, COALESCE(h.content, CASE WHEN h.version_id = r.version_id THEN r.content END) AS content';
/** Search SQL varies with the shape of the request; a bounded cache keeps the common shapes prepared. */
const MAX_CACHED_QUERIES = 256;

/** Prepared statements over one open database. */
export class ResourceStore {
  readonly #database: DatabaseSync;
  readonly #queries = new Map<string, StatementSync>();
  readonly #findCurrent: StatementSync;
  readonly #insertResource: StatementSync;
  readonly #updateResource: StatementSync;
  readonly #markDeleted: StatementSync;
  readonly #insertHistory: StatementSync;
  readonly #keepSuperseded: StatementSync;
  readonly #insertIndexRow: StatementSync;
  readonly #addType: StatementSync;
  readonly #typeCodeOf: StatementSync;
  readonly #deleteIndexRows: StatementSync;
  readonly #history: StatementSync;
  readonly #version: StatementSync;
  readonly #content: StatementSync;
  readonly #contents: StatementSync;
  readonly #readInfo: StatementSync;
  readonly #writeInfo: StatementSync;
  #commits = 0;

  constructor(database: DatabaseSync) {
    this.#database = database;
    this.#findCurrent = database.prepare(
      'SELECT pk, version_id, last_updated, deleted, content FROM resources WHERE resource_type = ? AND id = ?'
    );
    this.#insertResource = database.prepare(
      'INSERT INTO resources (resource_type, id, version_id, last_updated, project, deleted, content) ' +
        'VALUES (?, ?, ?, ?, ?, 0, ?)'
    );
    this.#updateResource = database.prepare(
      'UPDATE resources SET version_id = ?, last_updated = ?, project = ?, deleted = 0, content = ? WHERE pk = ?'
    );
    this.#markDeleted = database.prepare(
      'UPDATE resources SET version_id = ?, last_updated = ?, deleted = 1, content = NULL WHERE pk = ?'
    );
    // The current version's JSON is kept once, in `resources`: its history row holds NULL until a newer version
    // supersedes it, when the JSON is moved there (schema.ts, version 3).
    this.#insertHistory = database.prepare(
      'INSERT INTO resource_history (resource_pk, version_id, last_updated, content) VALUES (?, ?, ?, NULL)'
    );
    this.#keepSuperseded = database.prepare(
      'UPDATE resource_history SET content = r.content FROM resources r ' +
        'WHERE r.pk = ? AND resource_history.resource_pk = r.pk AND resource_history.version_id = r.version_id ' +
        'AND resource_history.content IS NULL AND r.content IS NOT NULL'
    );
    this.#insertIndexRow = database.prepare(
      'INSERT OR IGNORE INTO search_index (type_code, param, value, extra, resource_pk) VALUES (?, ?, ?, ?, ?)'
    );
    this.#addType = database.prepare('INSERT OR IGNORE INTO resource_types (name) VALUES (?)');
    this.#typeCodeOf = database.prepare('SELECT code FROM resource_types WHERE name = ?');
    this.#deleteIndexRows = database.prepare('DELETE FROM search_index WHERE resource_pk = ?');
    this.#history = database.prepare(
      `SELECT ${VERSION_COLUMNS} FROM resource_history h JOIN resources r ON r.pk = h.resource_pk WHERE h.resource_pk = ? ` +
        'ORDER BY h.seq DESC LIMIT ? OFFSET ?'
    );
    this.#version = database.prepare(
      `SELECT ${VERSION_COLUMNS} FROM resource_history h JOIN resources r ON r.pk = h.resource_pk WHERE h.resource_pk = ? AND h.version_id = ?`
    );
    this.#content = database.prepare('SELECT content FROM resources WHERE pk = ?');
    this.#contents = database.prepare('SELECT pk, content FROM resources WHERE pk IN (SELECT value FROM json_each(?)) AND content IS NOT NULL');
    this.#readInfo = database.prepare('SELECT value FROM store_info WHERE key = ?');
    this.#writeInfo = database.prepare('INSERT OR REPLACE INTO store_info (key, value) VALUES (?, ?)');
  }

  /**
   * Runs `work` atomically: its own IMMEDIATE transaction (taking the write lock up front, so that it waits for
   * another process rather than failing on upgrade), or a savepoint inside a transaction already open.
   */
  atomically<T>(work: () => T): T {
    if (this.#database.isTransaction) {
      this.#database.exec('SAVEPOINT store_write');
      try {
        const result = work();
        this.#database.exec('RELEASE store_write');
        return result;
      } catch (error) {
        // Some failures (I/O error, disk full) make SQLite roll the whole transaction back: no savepoint is left.
        if (this.#database.isTransaction) {
          this.#database.exec('ROLLBACK TO store_write');
          this.#database.exec('RELEASE store_write');
        }
        throw error;
      }
    }
    this.begin();
    try {
      const result = work();
      this.commit();
      return result;
    } catch (error) {
      this.rollback();
      throw error;
    }
  }

  /** Opens a transaction holding the write lock. */
  begin(): void {
    this.#database.exec('BEGIN IMMEDIATE');
  }

  /** Commits the open transaction. */
  commit(): void {
    this.#database.exec('COMMIT');
    this.#commits++;
  }

  /** COMMITs that returned since the store was opened; in a durable store each is followed by one sync of the log. */
  get commitCount(): number {
    return this.#commits;
  }

  /** True while a transaction is open on the connection. */
  get inTransaction(): boolean {
    return this.#database.isTransaction;
  }

  /** Rolls back the open transaction, if SQLite has not already. */
  rollback(): void {
    if (this.#database.isTransaction) {
      this.#database.exec('ROLLBACK');
    }
  }

  findCurrent(resourceType: string, id: string): CurrentRow | undefined {
    const row = this.#findCurrent.get(resourceType, id);
    if (!row) {
      return undefined;
    }
    return {
      pk: toNumber(row.pk),
      versionId: toText(row.version_id),
      lastUpdated: toText(row.last_updated),
      deleted: toNumber(row.deleted) !== 0,
      content: toOptionalText(row.content),
    };
  }

  /** Stores the first version of a new resource; returns its pk. */
  insertVersion(write: VersionWrite): number {
    const { lastInsertRowid } = this.#insertResource.run(
      write.resourceType,
      write.id,
      write.versionId,
      write.lastUpdated,
      write.project ?? null,
      write.content
    );
    const pk = Number(lastInsertRowid);
    this.#insertHistory.run(pk, write.versionId, write.lastUpdated);
    this.#insertIndexRows(pk, write);
    return pk;
  }

  /** Stores a new current version of the resource `pk` (also reviving a deleted one). */
  replaceVersion(pk: number, write: VersionWrite): void {
    this.#keepSuperseded.run(pk);
    this.#updateResource.run(write.versionId, write.lastUpdated, write.project ?? null, write.content, pk);
    this.#insertHistory.run(pk, write.versionId, write.lastUpdated);
    this.#deleteIndexRows.run(pk);
    this.#insertIndexRows(pk, write);
  }

  /** Records a delete: the resource leaves searches, its history gains an entry without content. */
  markDeleted(pk: number, versionId: string, lastUpdated: string): void {
    this.#keepSuperseded.run(pk);
    this.#markDeleted.run(versionId, lastUpdated, pk);
    this.#insertHistory.run(pk, versionId, lastUpdated);
    this.#deleteIndexRows.run(pk);
  }

  /** Versions of the resource `pk`, newest first. */
  history(pk: number, limit: number, offset: number): VersionRow[] {
    return this.#history.all(pk, limit, offset).map(toVersionRow);
  }

  version(pk: number, versionId: string): VersionRow | undefined {
    const row = this.#version.get(pk, versionId);
    return row ? toVersionRow(row) : undefined;
  }

  /** The current JSON of the resource `pk`, undefined when deleted. */
  contentOf(pk: number): string | undefined {
    return toOptionalText(this.#content.get(pk)?.content);
  }

  /** The current JSON of each of the resources `pks` that is not deleted, by pk. */
  contentsOf(pks: readonly number[]): Map<number, string> {
    const contents = new Map<number, string>();
    for (const row of this.#contents.all(JSON.stringify(pks))) {
      contents.set(toNumber(row.pk), toText(row.content));
    }
    return contents;
  }

  /** Runs a (cached) query and returns all rows. */
  queryAll(sql: string, params: readonly SQLInputValue[]): Record<string, SQLOutputValue>[] {
    return this.#prepared(sql).all(...params);
  }

  /** Runs a (cached) query and yields rows as SQLite produces them; stop early by leaving the loop. */
  queryIterate(sql: string, params: readonly SQLInputValue[]): Iterable<Record<string, SQLOutputValue>> {
    const statement = this.#prepared(sql);
    return { [Symbol.iterator]: () => statement.iterate(...params) };
  }

  /** The search index fingerprint recorded in the file. */
  indexFingerprint(): string | undefined {
    return toOptionalText(this.#readInfo.get(INDEX_FINGERPRINT_KEY)?.value);
  }

  /**
   * Rebuilds every index row with `rowsFor` when the file was indexed for another fingerprint (a changed list of
   * indexed parameters, or a new file), in one transaction.
   */
  ensureIndex(fingerprint: string, rowsFor: (content: string) => readonly IndexRow[]): void {
    if (this.indexFingerprint() === fingerprint) {
      return;
    }
    this.atomically(() => {
      if (this.indexFingerprint() === fingerprint) {
        return; // another process rebuilt it while this one waited for the lock
      }
      this.#database.exec('DELETE FROM search_index');
      const live = this.#database.prepare('SELECT pk, resource_type, content FROM resources WHERE deleted = 0');
      const typeCodes = new Map<string, number>();
      for (const row of live.iterate()) {
        const pk = toNumber(row.pk);
        const resourceType = toText(row.resource_type);
        const typeCode = typeCodes.get(resourceType) ?? this.#typeCode(resourceType);
        typeCodes.set(resourceType, typeCode);
        for (const indexRow of rowsFor(toText(row.content))) {
          this.#insertIndexRow.run(typeCode, indexRow.param, indexRow.value, indexRow.extra, pk);
        }
      }
      this.#writeInfo.run(INDEX_FINGERPRINT_KEY, fingerprint);
    });
  }

  #insertIndexRows(pk: number, write: VersionWrite): void {
    if (write.indexRows.length === 0) {
      return;
    }
    const typeCode = this.#typeCode(write.resourceType);
    for (const row of write.indexRows) {
      this.#insertIndexRow.run(typeCode, row.param, row.value, row.extra, pk);
    }
  }

  /**
   * The code of a resource type in `search_index`, given on its first index row, inside that row's transaction. Read
   * each time, not remembered: a code given in a transaction that then rolls back may be given to another type.
   */
  #typeCode(resourceType: string): number {
    this.#addType.run(resourceType);
    return toNumber(this.#typeCodeOf.get(resourceType)?.code);
  }

  #prepared(sql: string): StatementSync {
    let statement = this.#queries.get(sql);
    if (statement) {
      // Re-insert so that the Map's order is least recently used first.
      this.#queries.delete(sql);
    } else {
      statement = this.#database.prepare(sql);
      if (this.#queries.size >= MAX_CACHED_QUERIES) {
        const oldest = this.#queries.keys().next().value;
        if (oldest !== undefined) {
          this.#queries.delete(oldest);
        }
      }
    }
    this.#queries.set(sql, statement);
    return statement;
  }
}

function toVersionRow(row: Record<string, SQLOutputValue>): VersionRow {
  return {
    versionId: toText(row.version_id),
    lastUpdated: toText(row.last_updated),
    content: toOptionalText(row.content),
  };
}

/** Reads an INTEGER column. */
export function toNumber(value: SQLOutputValue | undefined): number {
  if (typeof value === 'number') {
    return value;
  }
  if (typeof value === 'bigint') {
    return Number(value);
  }
  throw new Error(`Expected an integer column, found ${typeof value}`);
}

function toText(value: SQLOutputValue | undefined): string {
  if (typeof value !== 'string') {
    throw new Error(`Expected a text column, found ${typeof value}`);
  }
  return value;
}

function toOptionalText(value: SQLOutputValue | undefined): string | undefined {
  return value === null || value === undefined ? undefined : toText(value);
}
