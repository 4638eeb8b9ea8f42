/**
 * Row-level access to the store's tables: every statement is prepared once and reused. No FHIR rules here;
 * the repository decides what to write and this class writes it.
 */
import type { DatabaseSync, SQLInputValue, SQLOutputValue, StatementSync } from 'node:sqlite';
import { DecodedContentCache } from './content-cache.ts';
import { VerdictCache } from './verdict-cache.ts';
import { decodeContent, encodeContent } from './content-codec.ts';
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
 * A resource's versions, newest first: the current one (its row in `resources`, a delete included) and the
 * superseded ones (`resource_history`, by `seq`). Bound: the resource's pk, twice.
 */
const VERSIONS =
  'SELECT version_id, last_updated, content FROM (' +
  'SELECT version_id, last_updated, content, 9223372036854775807 AS seq FROM resources WHERE pk = ? ' +
  'UNION ALL SELECT version_id, last_updated, content, seq FROM resource_history WHERE resource_pk = ?)';
/** Search SQL varies with the shape of the request; a bounded cache keeps the common shapes prepared. */
const MAX_CACHED_QUERIES = 256;
/** Index rows inserted by one statement at most (a Communication has about 14; SQLite takes up to 32,766 values). */
const MAX_ROWS_PER_INSERT = 32;

/** Prepared statements over one open database. */
export class ResourceStore {
  readonly #database: DatabaseSync;
  readonly #queries = new Map<string, StatementSync>();
  readonly #findCurrent: StatementSync;
  readonly #insertResource: StatementSync;
  readonly #updateResource: StatementSync;
  readonly #markDeleted: StatementSync;
  readonly #keepSuperseded: StatementSync;
  /** Statements inserting N index rows at once, by N (up to MAX_ROWS_PER_INSERT), made on first use. */
  readonly #insertRowsByCount = new Map<number, StatementSync>();
  readonly #addType: StatementSync;
  readonly #addParam: StatementSync;
  /** Index row parameters' codes, given in a committed transaction (registerParams): never one a rollback undid. */
  readonly #paramCodes = new Map<string, number>();
  /** Resource types' codes given in a committed transaction (registerTypes); any other type's is read each time. */
  readonly #typeCodes = new Map<string, number>();
  readonly #typeCodeOf: StatementSync;
  readonly #deleteIndexRows: StatementSync;
  readonly #history: StatementSync;
  readonly #version: StatementSync;
  readonly #content: StatementSync;
  readonly #contents: StatementSync;
  readonly #readInfo: StatementSync;
  readonly #dataVersion: StatementSync;
  /** The last fingerprint check, and SQLite's count of other connections' commits when it was made. */
  #indexChecked: { readonly dataVersion: number; readonly fingerprint: string; readonly matches: boolean } | undefined;
  readonly #writeInfo: StatementSync;
  readonly #decoded = new DecodedContentCache();
  /** What searches' conditions said of each version (verdict-cache.ts); dropped when the indexed parameters change. */
  readonly verdicts = new VerdictCache();
  #commits = 0;

  constructor(database: DatabaseSync) {
    this.#database = database;
    this.#findCurrent = database.prepare(
      'SELECT pk, version_id, last_updated, deleted, content FROM resources WHERE resource_type = ? AND id = ?'
    );
    // The row read most often (every read by id): an array of its columns (queryArrays says why).
    this.#findCurrent.setReturnArrays(true);
    // A type and id already in use (a deleted resource's too) leave the row as it is: insertVersion says so.
    this.#insertResource = database.prepare(
      'INSERT INTO resources (resource_type, id, version_id, last_updated, project, deleted, content) ' +
        'VALUES (?, ?, ?, ?, ?, 0, ?) ON CONFLICT (resource_type, id) DO NOTHING'
    );
    this.#updateResource = database.prepare(
      'UPDATE resources SET version_id = ?, last_updated = ?, project = ?, deleted = 0, content = ? WHERE pk = ?'
    );
    this.#markDeleted = database.prepare(
      'UPDATE resources SET version_id = ?, last_updated = ?, deleted = 1, content = NULL WHERE pk = ?'
    );
    // The current version is kept once, in `resources`; it becomes a history row when a newer version supersedes
    // it (schema.ts, version 5). A delete superseded by a new version is a history row without JSON.
    this.#keepSuperseded = database.prepare(
      'INSERT INTO resource_history (resource_pk, version_id, last_updated, content) ' +
        'SELECT pk, version_id, last_updated, content FROM resources WHERE pk = ?'
    );
    this.#addType = database.prepare('INSERT OR IGNORE INTO resource_types (name) VALUES (?)');
    this.#addParam = database.prepare('INSERT OR IGNORE INTO search_params (name) VALUES (?)');
    this.#typeCodeOf = database.prepare('SELECT code FROM resource_types WHERE name = ?');
    this.#deleteIndexRows = database.prepare('DELETE FROM search_index WHERE resource_pk = ?');
    this.#history = database.prepare(`${VERSIONS} ORDER BY seq DESC LIMIT ? OFFSET ?`);
    this.#version = database.prepare(`${VERSIONS} WHERE version_id = ? LIMIT 1`);
    this.#content = database.prepare('SELECT version_id, content FROM resources WHERE pk = ?');
    this.#contents = database.prepare('SELECT pk, version_id, content FROM resources WHERE pk IN (SELECT value FROM json_each(?)) AND content IS NOT NULL');
    this.#contents.setReturnArrays(true); // a page's records: pk, version id, content
    this.#readInfo = database.prepare('SELECT value FROM store_info WHERE key = ?');
    this.#dataVersion = database.prepare('PRAGMA data_version');
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
    const row = this.#findCurrent.get(resourceType, id) as unknown as SQLOutputValue[] | undefined;
    if (!row) {
      return undefined;
    }
    const [pkColumn, versionColumn, lastUpdated, deleted, content] = row;
    const pk = toNumber(pkColumn);
    const versionId = toText(versionColumn);
    return { pk, versionId, lastUpdated: toText(lastUpdated), deleted: toNumber(deleted) !== 0, content: this.#decodedOrUndefined(pk, versionId, content) };
  }

  /**
   * Stores the first version of a new resource; returns its pk, or undefined when a resource of its type has its id
   * already (a deleted one too), which is left as it is: the table's unique index is the check, with no read before.
   */
  insertVersion(write: VersionWrite): number | undefined {
    const { changes, lastInsertRowid } = this.#insertResource.run(
      write.resourceType,
      write.id,
      write.versionId,
      write.lastUpdated,
      write.project ?? null,
      encodeContent(write.content)
    );
    if (Number(changes) === 0) {
      return undefined;
    }
    const pk = Number(lastInsertRowid);
    this.#decoded.remember(pk, write.versionId, write.content);
    this.#insertIndexRows(pk, write);
    return pk;
  }

  /** Stores a new current version of the resource `pk` (also reviving a deleted one). */
  replaceVersion(pk: number, write: VersionWrite): void {
    this.#keepSuperseded.run(pk);
    this.#updateResource.run(write.versionId, write.lastUpdated, write.project ?? null, encodeContent(write.content), pk);
    this.#decoded.remember(pk, write.versionId, write.content);
    this.#deleteIndexRows.run(pk);
    this.#insertIndexRows(pk, write);
  }

  /** Records a delete: the resource leaves searches, its history gains an entry without content. */
  markDeleted(pk: number, versionId: string, lastUpdated: string): void {
    this.#keepSuperseded.run(pk);
    this.#markDeleted.run(versionId, lastUpdated, pk);
    this.#deleteIndexRows.run(pk);
  }

  /** Versions of the resource `pk`, newest first. */
  history(pk: number, limit: number, offset: number): VersionRow[] {
    return this.#history.all(pk, pk, limit, offset).map((row) => this.#toVersionRow(pk, row));
  }

  version(pk: number, versionId: string): VersionRow | undefined {
    const row = this.#version.get(pk, pk, versionId);
    return row ? this.#toVersionRow(pk, row) : undefined;
  }

  /** The current JSON of the resource `pk`, undefined when deleted. */
  contentOf(pk: number): string | undefined {
    const row = this.#content.get(pk);
    return row ? this.#decodedOrUndefined(pk, toText(row.version_id), row.content) : undefined;
  }

  /** The current JSON of each of the resources `pks` that is not deleted, by pk. */
  contentsOf(pks: readonly number[]): Map<number, string> {
    const contents = new Map<number, string>();
    for (const [pkColumn, versionId, content] of this.#contents.all(JSON.stringify(pks)) as unknown as SQLOutputValue[][]) {
      const pk = toNumber(pkColumn);
      contents.set(pk, this.#decoded.decode(pk, toText(versionId), content));
    }
    return contents;
  }

  /** Runs a (cached) query and returns all rows. */
  queryAll(sql: string, params: readonly SQLInputValue[]): Record<string, SQLOutputValue>[] {
    return this.#prepared(sql, false).all(...params);
  }

  /**
   * Runs a (cached) query and returns all rows, each an array of its columns in the SELECT's order. For the
   * statements that return many rows a turn: node:sqlite makes each row an object in dictionary mode, slow to build
   * and to read (about 0.2 µs a property read; an array's element, about 0.02).
   */
  queryArrays(sql: string, params: readonly SQLInputValue[]): SQLOutputValue[][] {
    return this.#prepared(sql, true).all(...params) as unknown as SQLOutputValue[][];
  }

  /** Runs a (cached) query and yields rows as SQLite produces them; stop early by leaving the loop. */
  queryIterate(sql: string, params: readonly SQLInputValue[]): Iterable<Record<string, SQLOutputValue>> {
    const statement = this.#prepared(sql, false);
    return { [Symbol.iterator]: () => statement.iterate(...params) };
  }

  /**
   * Gives each resource type of `names` its code in `resource_types` now, in a transaction of its own, so that a
   * write of one of them finds its code without a statement. A type not named is given its code by its first write.
   */
  registerTypes(names: readonly string[]): void {
    this.#registerCodes('resource_types', this.#addType, names, this.#typeCodes);
  }

  /**
   * Gives each index row parameter of `names` its code in the file (another process may have given it already),
   * committed before any row uses it, and remembers the codes.
   */
  registerParams(names: readonly string[]): void {
    this.#registerCodes('search_params', this.#addParam, names, this.#paramCodes);
  }

  /** Reads `table`'s codes into `codes`; names it lacks are added (`add`) in a transaction of their own, then read. */
  #registerCodes(table: 'resource_types' | 'search_params', add: StatementSync, names: readonly string[], codes: Map<string, number>): void {
    const readCodes = (): void => {
      for (const row of this.#database.prepare(`SELECT code, name FROM ${table}`).all()) {
        codes.set(toText(row.name), toNumber(row.code));
      }
    };
    // Read first: a file that has them all (every open after the first) takes no write lock.
    readCodes();
    const missing = names.filter((name) => !codes.has(name));
    if (missing.length > 0) {
      this.atomically(() => {
        for (const name of missing) {
          add.run(name);
        }
      });
      readCodes();
    }
  }

  /** The search index fingerprint recorded in the file. */
  indexFingerprint(): string | undefined {
    return toOptionalText(this.#readInfo.get(INDEX_FINGERPRINT_KEY)?.value);
  }

  /**
   * Whether the file is indexed for `fingerprint`, as `indexFingerprint()` would say, asked before every search. The
   * fingerprint (every indexed parameter, a few KB) is read again only when another connection committed since the
   * last check (`PRAGMA data_version`): only another process can re-index the file while this one has it open, and
   * reading the text on every search cost each search an allocation of its size.
   */
  indexMatches(fingerprint: string): boolean {
    const dataVersion = Number(this.#dataVersion.get()?.data_version);
    const checked = this.#indexChecked;
    if (checked && checked.dataVersion === dataVersion && checked.fingerprint === fingerprint) {
      return checked.matches;
    }
    const matches = this.indexFingerprint() === fingerprint;
    if (!matches) {
      this.verdicts.clear();
    }
    this.#indexChecked = { dataVersion, fingerprint, matches };
    return matches;
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
      for (const row of live.iterate()) {
        this.#insertIndexRows(toNumber(row.pk), { resourceType: toText(row.resource_type), indexRows: rowsFor(decodeContent(row.content)) });
      }
      this.#writeInfo.run(INDEX_FINGERPRINT_KEY, fingerprint);
    });
    this.#indexChecked = undefined;
    this.verdicts.clear();
  }

  #insertIndexRows(pk: number, write: Pick<VersionWrite, 'resourceType' | 'indexRows'>): void {
    if (write.indexRows.length === 0) {
      return;
    }
    const typeCode = this.#typeCode(write.resourceType);
    // Several rows a statement: a statement's call costs about as much as SQLite's insert of a row, so 14 rows at once
    // take about a fifth less time than one by one.
    for (let start = 0; start < write.indexRows.length; start += MAX_ROWS_PER_INSERT) {
      const rows = write.indexRows.slice(start, start + MAX_ROWS_PER_INSERT);
      const values: SQLInputValue[] = [];
      for (const row of rows) {
        values.push(typeCode, this.#paramCode(row.param), row.value, row.extra, pk);
      }
      this.#insertRows(rows.length).run(...values);
    }
  }

  #insertRows(count: number): StatementSync {
    let statement = this.#insertRowsByCount.get(count);
    if (!statement) {
      const placeholders = Array.from({ length: count }, () => '(?, ?, ?, ?, ?)').join(', ');
      statement = this.#database.prepare(`INSERT OR IGNORE INTO search_index (type_code, param, value, extra, resource_pk) VALUES ${placeholders}`);
      this.#insertRowsByCount.set(count, statement);
    }
    return statement;
  }

  #paramCode(name: string): number {
    const code = this.#paramCodes.get(name);
    if (code === undefined) {
      throw new Error(`The search index has no code for the parameter ${name}`);
    }
    return code;
  }

  /**
   * The code of a resource type in `search_index`: registered (registerTypes), or given on its first index row, inside
   * that row's transaction, and then read each time, not remembered: a code given in a transaction that then rolls
   * back may be given to another type.
   */
  #typeCode(resourceType: string): number {
    const registered = this.#typeCodes.get(resourceType);
    if (registered !== undefined) {
      return registered;
    }
    this.#addType.run(resourceType);
    return toNumber(this.#typeCodeOf.get(resourceType)?.code);
  }

  #toVersionRow(pk: number, row: Record<string, SQLOutputValue>): VersionRow {
    const versionId = toText(row.version_id);
    return { versionId, lastUpdated: toText(row.last_updated), content: this.#decodedOrUndefined(pk, versionId, row.content) };
  }

  /** A version's JSON, undefined for NULL (a delete). */
  #decodedOrUndefined(pk: number, versionId: string, stored: SQLOutputValue | undefined): string | undefined {
    return stored === null || stored === undefined ? undefined : this.#decoded.decode(pk, versionId, stored);
  }

  #prepared(sql: string, arrays: boolean): StatementSync {
    // A statement's rows are objects or arrays for good: the two kinds are cached apart.
    const key = arrays ? `[]${sql}` : sql;
    let statement = this.#queries.get(key);
    if (statement) {
      // Re-insert so that the Map's order is least recently used first.
      this.#queries.delete(key);
    } else {
      statement = this.#database.prepare(sql);
      statement.setReturnArrays(arrays);
      if (this.#queries.size >= MAX_CACHED_QUERIES) {
        const oldest = this.#queries.keys().next().value;
        if (oldest !== undefined) {
          this.#queries.delete(oldest);
        }
      }
    }
    this.#queries.set(key, statement);
    return statement;
  }
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
